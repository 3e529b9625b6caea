#!/usr/bin/env bash
# The CUDA suite under the SIMT emulator with AddressSanitizer: the CPU's stand-in for compute-sanitizer's
# memcheck. Every kernel runs on the CPU (tests/simt) with device memory allocated to the exact byte, so a
# kernel that reads or writes past a buffer stops with AddressSanitizer's report naming the kernel.
# Not part of scripts/test.sh (a second full build, and the suite runs about three times slower); run it
# after changing a kernel. About 15 minutes on 2 cores.
# Use: scripts/simt_memcheck.sh   (BUILD_DIR, default build-simt-asan)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${BUILD_DIR:-build-simt-asan}
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DGPT_MPI=OFF -DGPT_SIMT_ASAN=ON >/dev/null
cmake --build "$build" -j "$(nproc)" --target test_cuda_simt test_simt
# Leaks are not the question here (the tests' backends live until exit).
export ASAN_OPTIONS=detect_leaks=0:abort_on_error=1
"$build/tests/test_simt" --gtest_brief=1
"$build/tests/test_cuda_simt" --gtest_brief=1
echo "simt_memcheck: the CUDA suite passed under the SIMT emulator with AddressSanitizer"
