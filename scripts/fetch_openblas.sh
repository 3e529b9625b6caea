#!/usr/bin/env bash
# Fetches what a bare GPU machine lacks to build the CPU twin and the test suites, from Debian's archive,
# without installing anything: `apt-get download` the .deb files, `dpkg-deb -x` them, and keep the needed files
# under third_party/local/ (git-ignored; it travels to the lent machine when named in `carry`):
#   third_party/local/openblas/include      cblas.h, openblas_config.h, ... (the OpenMP build's headers)
#   third_party/local/openblas/lib          libopenblas.so -> libopenblas.so.0 (OpenMP build)
#   third_party/local/openblas/lib/runtime  libgfortran.so.5, libquadmath.so.0, libgomp.so.1: OpenBLAS's own
#                                           runtime, for machines without them (gpu_check.sh links only the
#                                           missing ones, so a newer system copy is never shadowed)
#   third_party/local/gtest/usr             GoogleTest headers, static libraries and CMake package
# The OpenMP flavour is chosen because the CPU kernels run inside OpenMP regions (see DESIGN.md).
# Use: scripts/fetch_openblas.sh [--no-gtest]; then configure with
#   -DGPT_OPENBLAS_ROOT=$PWD/third_party/local/openblas
#   -DGTest_DIR=$PWD/third_party/local/gtest/usr/lib/x86_64-linux-gnu/cmake/GTest
# scripts/gpu_check.sh finds both there by itself (`scripts/gpu_check.sh --dry-run` checks they are present).
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
dest="$root/third_party/local"
with_gtest=1
for arg in "$@"; do
  case "$arg" in
    --no-gtest) with_gtest=0 ;;
    -h|--help) sed -n '2,15p' "$0"; exit 0 ;;
    *) echo "fetch_openblas.sh: unknown argument '$arg' (expected --no-gtest)" >&2; exit 2 ;;
  esac
done
command -v apt-get >/dev/null && command -v dpkg-deb >/dev/null ||
  { echo "fetch_openblas.sh: needs apt-get and dpkg-deb (a Debian or Ubuntu machine)" >&2; exit 1; }

work=$(mktemp -d)
chmod 777 "$work"  # as root, apt-get download drops to the _apt user, which must be able to write here
trap 'rm -rf "$work"' EXIT
pkgs=(libopenblas0-openmp libopenblas-openmp-dev libgfortran5 libquadmath0 libgomp1)
[[ $with_gtest == 1 ]] && pkgs+=(libgtest-dev)
echo "downloading: ${pkgs[*]}"
(cd "$work" && apt-get download "${pkgs[@]}")
for deb in "$work"/*.deb; do dpkg-deb -x "$deb" "$work/root"; done

arch_lib="$work/root/usr/lib/x86_64-linux-gnu"
blas_inc="$work/root/usr/include/x86_64-linux-gnu/openblas-openmp"
blas_lib="$arch_lib/openblas-openmp"
[[ -f "$blas_inc/cblas.h" && -e "$blas_lib/libopenblas.so.0" ]] ||
  { echo "fetch_openblas.sh: unexpected package layout (no cblas.h or libopenblas.so.0)" >&2; exit 1; }

rm -rf "$dest/openblas"
mkdir -p "$dest/openblas/include" "$dest/openblas/lib/runtime"
cp "$blas_inc"/*.h "$dest/openblas/include/"
cp -a "$blas_lib"/libopenblas*.so* "$dest/openblas/lib/"
ln -sf libopenblas.so.0 "$dest/openblas/lib/libopenblas.so"
for lib in libgfortran.so.5 libquadmath.so.0 libgomp.so.1; do
  cp -aL "$arch_lib/$lib" "$dest/openblas/lib/runtime/$lib"
done

if [[ $with_gtest == 1 ]]; then
  rm -rf "$dest/gtest"
  mkdir -p "$dest/gtest/usr/lib"
  cp -a "$work/root/usr/include" "$dest/gtest/usr/"
  cp -a "$arch_lib" "$dest/gtest/usr/lib/"
  rm -rf "$dest/gtest/usr/lib/x86_64-linux-gnu/openblas-openmp" "$dest/gtest/usr/include/x86_64-linux-gnu"
  rm -f "$dest"/gtest/usr/lib/x86_64-linux-gnu/lib{gfortran,quadmath,gomp}*
  rm -rf "$dest/gtest/usr/lib/x86_64-linux-gnu/cmake/openblas"  # the -dev package's, empty without its library
fi

echo "OpenBLAS: $dest/openblas ($(du -sh "$dest/openblas" | cut -f1))"
echo "  configure with -DGPT_OPENBLAS_ROOT=$dest/openblas"
if [[ $with_gtest == 1 ]]; then
  echo "GoogleTest: $dest/gtest ($(du -sh "$dest/gtest" | cut -f1))"
  echo "  configure with -DGTest_DIR=$dest/gtest/usr/lib/x86_64-linux-gnu/cmake/GTest"
fi
# It travels to the lent machine with the working tree, within 64 MiB for both together.
total=$(du -sb "$dest" | cut -f1)
echo "third_party/local: $((total / 1048576)) MiB in all (carry it; with the working tree it must stay under 64 MiB)"
if ((total > 56 * 1048576)); then
  echo "fetch_openblas.sh: third_party/local is over 56 MiB, too much to travel beside the working tree" >&2
  exit 1
fi
