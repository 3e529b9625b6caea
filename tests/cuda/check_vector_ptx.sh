#!/usr/bin/env bash
# Why: the memory-bound CUDA kernels are written to move 16 bytes per access (kernels/cuda/common.cuh), and
# their speed rests on the compiler keeping those accesses whole. This check needs no GPU: it compiles the
# kernels to PTX for sm_90 and asserts that every vector-path kernel has 128-bit (.v4) global loads, and
# 128-bit stores where it writes activations, so a change that splits them into 2-byte accesses fails here
# instead of showing up only as a slower step on a GPU. Each expectation must match at least one kernel, so
# a renamed kernel fails too rather than passing unchecked.
#
# Usage: tests/cuda/check_vector_ptx.sh NVCC SOURCE_DIR [WORK_DIR]
set -euo pipefail
nvcc=${1:?usage: check_vector_ptx.sh NVCC SOURCE_DIR [WORK_DIR]}
src=${2:?usage: check_vector_ptx.sh NVCC SOURCE_DIR [WORK_DIR]}
work=${3:-$(mktemp -d)}
mkdir -p "$work"
command -v c++filt >/dev/null || { echo "check_vector_ptx: c++filt (binutils) is needed to read kernel names" >&2; exit 1; }

files=(adamw attention_fused classifier encoder gelu layernorm matmul residual)
pids=()
for f in "${files[@]}"; do
  rm -f "$work/$f.ptx"  # a failed nvcc leaves an old output in place: never read a stale one
  "$nvcc" -DGPT_WITH_CUDA=1 -I"$src" -O3 -DNDEBUG -arch=compute_90 --expt-relaxed-constexpr -std=c++17 \
    --ptx "$src/kernels/cuda/$f.cu" -o "$work/$f.ptx" &
  pids+=($!)
done
failed=0
for pid in "${pids[@]}"; do wait "$pid" || failed=1; done
[ "$failed" = 0 ] || { echo "check_vector_ptx: nvcc failed to write PTX" >&2; exit 1; }

# One line per kernel entry: "<128-bit loads> <128-bit stores> <demangled name without arguments>".
table=$work/vector_access.txt
for f in "${files[@]}"; do
  awk '/\.entry /{match($0, /_Z[A-Za-z0-9_]+/); name = substr($0, RSTART, RLENGTH); seen[name] = 1}
       /ld\.global[.a-zA-Z0-9:_]*\.v4\./{ld[name]++}
       /st\.global[.a-zA-Z0-9:_]*\.v4\./{st[name]++}
       END {for (k in seen) printf "%d %d %s\n", ld[k], st[k], k}' "$work/$f.ptx"
done | while read -r ld st mangled; do
  name=$(echo "$mangled" | c++filt | sed -E 's/\(anonymous namespace\):://g; s/gpt::cuda:://g; s/^void //; s/\(.*//')
  echo "$ld $st $name"
done | sort -k3 > "$table"

# Expectations: a name pattern (an extended regex on the whole name) and whether stores must be 128-bit too.
expect=(
  "adamw_kernel load+store"
  "accumulate_kernel load+store"
  "sum_squares_partials_kernel load"
  "bias_partials_kernel<true> load"
  "classifier_kernel<true, true> load+store"
  "classifier_kernel<false, true> load"
  "encoder_forward_kernel<true> load+store"
  "wte_backward_kernel<true> load+store"
  "wpe_backward_kernel<true> load+store"
  "embedding_slice_forward_kernel<true> load+store"
  "add_table_rows_kernel<true> load+store"
  "slice_stats_kernel<true> load"
  "slice_sumexp_kernel<true> load"
  "slice_backward_kernel<true> load+store"
  "layernorm_forward_kernel<(true|false), true> load+store"
  "layernorm_backward_rows_kernel<(true|false), true> load+store"
  "map_kernel<Add> load+store"
  "map_kernel<GeluForward> load+store"
  "map_kernel<GeluBackward> load+store"
  "fused_forward_kernel<(32|64), true> load"
  "fused_backward_dkdv_kernel<(32|64), true> load+store"
  "fused_backward_dq_kernel<(32|64), true> load+store"
  "row_dot_kernel<true> load"
)
fail=0
for e in "${expect[@]}"; do
  pattern=${e% *} need=${e##* } matched=0
  while read -r ld st name; do
    [[ "$name" =~ ^${pattern}$ ]] || continue
    matched=$((matched + 1))
    if [ "$ld" -lt 1 ] || { [ "$need" = load+store ] && [ "$st" -lt 1 ]; }; then
      echo "FAIL $name: $ld 128-bit loads, $st 128-bit stores (expected $need)"
      fail=1
    else
      echo "ok   $name: $ld 128-bit loads, $st 128-bit stores"
    fi
  done < "$table"
  if [ "$matched" = 0 ]; then
    echo "FAIL no kernel matches '$pattern' (renamed? update this check)"
    fail=1
  fi
done
exit "$fail"
