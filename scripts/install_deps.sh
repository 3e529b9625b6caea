#!/usr/bin/env bash
# Installs what the build and tests need on a fresh Debian machine (as root), skipping what is present:
# compiler + CMake + Ninja, OpenBLAS (OpenMP build), OpenMPI, GoogleTest, and Debian's python3 with numpy,
# matplotlib and scipy (the scaling scripts, plots and fits). scripts/fuzz.sh installs clang's libFuzzer runtime itself.
set -euo pipefail
need=()
have_pkg() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"; }
for p in build-essential cmake ninja-build libopenblas-dev libopenblas0-openmp openmpi-bin libopenmpi-dev \
         libgtest-dev pkg-config python3 python3-numpy python3-matplotlib python3-scipy; do
  have_pkg "$p" || need+=("$p")
done
if [ "${#need[@]}" -gt 0 ]; then
  if [ "$(id -u)" != 0 ]; then
    echo "error: missing packages (${need[*]}); run as root or install them with apt-get" >&2
    exit 1
  fi
  echo "installing: ${need[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi
