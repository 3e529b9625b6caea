#!/usr/bin/env bash
# Configures and builds into build/ (or $BUILD_DIR; Release). Our kernels are compiled for
# GPT_MARCH=x86-64|x86-64-v3|x86-64-v4|native (default native; GPT_PORTABLE=1 is GPT_MARCH=x86-64).
# CUDA is built when nvcc exists (set GPT_CUDA=OFF to skip it), MPI when OpenMPI is installed.
#   scripts/build.sh [TARGET...]    (default: everything, tests included)
set -euo pipefail
cd "$(dirname "$0")/.."
args=(-G Ninja -DCMAKE_BUILD_TYPE=Release)
[ "${GPT_PORTABLE:-0}" = 1 ] && args+=(-DGPT_PORTABLE=ON)
[ -n "${GPT_MARCH:-}" ] && args+=(-DGPT_MARCH="$GPT_MARCH")
args+=(-DGPT_CUDA="${GPT_CUDA:-AUTO}")
cmake -S . -B "${BUILD_DIR:-build}" "${args[@]}" >/dev/null
targets=()
for t in "$@"; do targets+=(--target "$t"); done
cmake --build "${BUILD_DIR:-build}" -j "$(nproc)" "${targets[@]}"
