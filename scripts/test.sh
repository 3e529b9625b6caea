#!/usr/bin/env bash
# Installs what is missing, builds (with CUDA when nvcc exists, so CUDA compile errors cannot land),
# and runs every test with ctest: op, model, io, train and CLI suites, the FSDP suite under
# mpiexec -n 1..4, and the CUDA suite (which reports its tests as skipped without a GPU). Then the
# --quick mode of every scaling script (each must produce its CSV), and, when clang is present, a short
# libFuzzer run of every file reader (FUZZ_SECONDS each, default 30; 0 skips).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install_deps.sh
scripts/build.sh
(cd "${BUILD_DIR:-build}" && ctest --output-on-failure -j "${CTEST_JOBS:-2}" --timeout 900)
scripts/scaling/run_all_quick.sh --gpt "${BUILD_DIR:-build}/gpt"
if [ "${FUZZ_SECONDS:-30}" != 0 ]; then
  scripts/fuzz.sh "${FUZZ_SECONDS:-30}"
fi
