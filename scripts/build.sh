#!/usr/bin/env bash
# Configures and builds into build/ (or $BUILD_DIR; Release). Our kernels are compiled for
# GPT_MARCH=x86-64|x86-64-v3|x86-64-v4|native (default native; GPT_PORTABLE=1 or ON is GPT_MARCH=x86-64).
# CUDA is built when nvcc exists (set GPT_CUDA=OFF to skip it), MPI when OpenMPI is installed.
#   scripts/build.sh [TARGET...]    (default: everything, tests included)
set -euo pipefail
cd "$(dirname "$0")/.."
args=(-G Ninja -DCMAKE_BUILD_TYPE=Release)
case "${GPT_PORTABLE:-0}" in
  1 | ON | on | TRUE | true | YES | yes) args+=(-DGPT_PORTABLE=ON) ;;
  0 | OFF | off | FALSE | false | NO | no) args+=(-DGPT_PORTABLE=OFF) ;;  # also undoes an earlier ON in the cache
  "") ;;
  *) echo "build.sh: GPT_PORTABLE must be 1/ON or 0/OFF, got '$GPT_PORTABLE'" >&2; exit 2 ;;
esac
[ -n "${GPT_MARCH:-}" ] && args+=(-DGPT_MARCH="$GPT_MARCH")
args+=(-DGPT_CUDA="${GPT_CUDA:-AUTO}")
cmake -S . -B "${BUILD_DIR:-build}" "${args[@]}" >/dev/null
targets=()
for t in "$@"; do targets+=(--target "$t"); done
cmake --build "${BUILD_DIR:-build}" -j "$(nproc)" "${targets[@]}"
