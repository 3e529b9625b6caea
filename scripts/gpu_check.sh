#!/usr/bin/env bash
# The check to run on a lent GPU machine (one H200: nvcc 13, CMake, ninja, python3 with torch; maybe no
# OpenBLAS, GoogleTest or MPI). Stages, each under its own `timeout`, all within a budget of 8 minutes:
#   info, configure (CUDA on, MPI off, sm_90), build, test_cuda (CUDA ops vs CPU twins), test_ops (CPU ops),
#   bench_d12 / bench_d12_fused (--attention fused) / bench_d48_recompute / bench_d48_offload
#   (`gpt bench --device cuda`), bench_pytorch (the peer),
#   sanitize (compute-sanitizer memcheck over the twin tests, with whatever time is left).
# A failing stage is recorded and the next one still runs. Output: every stage's full output in
# gpu_check.log and one summary object in gpu_check.json, under $OUT when it is set (the lent machine's
# return folder), else under build/gpu_check/. The terminal gets one line per stage and the summary.
#
# Missing OpenBLAS / GoogleTest: run scripts/fetch_openblas.sh on a Debian machine first and carry
# third_party/local with the working tree; this script then configures against it and puts OpenBLAS's runtime
# libraries on LD_LIBRARY_PATH (only those the machine lacks).
# Environment: BUILD_DIR (default build), GPU_CHECK_BUDGET_S (default 480), CUDA_ARCH (default 90).
set -uo pipefail  # no -e: a failing stage must not stop the later ones

root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
build=${BUILD_DIR:-build}
budget=${GPU_CHECK_BUDGET_S:-480}
out_dir=${OUT:-$root/$build/gpu_check}
mkdir -p "$out_dir" "$build"
log="$out_dir/gpu_check.log"
json="$out_dir/gpu_check.json"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
: >"$log"
t_start=$(date +%s)
deadline=$((t_start + budget))
stages=()   # JSON objects, one per stage
results=()  # "key": value pairs for the results object

json_str() {  # a JSON string literal of $1 (quotes, backslashes and control characters escaped)
  local s=${1//\\/\\\\}
  s=${s//\"/\\\"}
  s=${s//$'\n'/\\n}
  s=${s//$'\t'/ }
  s=${s//$'\r'/}
  printf '"%s"' "$s"
}

record() {  # name status rc seconds note
  stages+=("{\"name\": $(json_str "$1"), \"status\": $(json_str "$2"), \"rc\": ${3:-null}, \"seconds\": ${4:-0}, \"note\": $(json_str "${5:-}")}")
  printf '%-20s %-8s rc=%-4s %7ss  %s\n' "$1" "$2" "${3:--}" "${4:-0}" "${5:-}"
  printf '=== [%s] %s (rc %s, %s s) %s\n' "$1" "$2" "${3:--}" "${4:-0}" "${5:-}" >>"$log"
}

skip() { record "$1" skipped "" 0 "$2"; }

# run NAME LIMIT_S CMD...: runs CMD under `timeout`, never past the budget; output to $tmp/NAME.out and the log.
run() {
  local name=$1 limit=$2
  shift 2
  local left=$((deadline - $(date +%s)))
  if ((left < 15)); then
    skip "$name" "no time left in the ${budget} s budget"
    return 99
  fi
  ((limit > left)) && limit=$left
  printf '=== [%s] %s (timeout %s s)\n' "$name" "$*" "$limit" >>"$log"
  local t0 rc status
  t0=$(date +%s.%N)
  timeout --kill-after=10 "$limit" "$@" >"$tmp/$name.out" 2>&1
  rc=$?
  cat "$tmp/$name.out" >>"$log"
  local secs
  secs=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
  status=ok
  ((rc != 0)) && status=failed
  ((rc == 124 || rc == 137)) && status=timeout
  record "$name" "$status" "$rc" "$secs" "${note:-}"
  return "$rc"
}

# The last line of a stage's output that is a JSON object, or null.
last_json() { grep -E '^\{.*\}$' "$tmp/$1.out" 2>/dev/null | tail -n 1 || true; }
add_result() { results+=("$(json_str "$1"): ${2:-null}"); }

# gtest summary -> {"passed": P, "failed": F, "skipped": S}
gtest_counts() {
  local f="$tmp/$1.out" p fl s
  p=$(sed -n 's/^\[  PASSED  \] \([0-9]*\) tests\{0,1\}\..*/\1/p' "$f" | tail -n 1)
  fl=$(sed -n 's/^\[  FAILED  \] \([0-9]*\) tests\{0,1\}, listed below.*/\1/p' "$f" | tail -n 1)
  s=$(sed -n 's/^\[  SKIPPED \] \([0-9]*\) tests\{0,1\}, listed below.*/\1/p' "$f" | tail -n 1)
  printf '{"passed": %s, "failed": %s, "skipped": %s}' "${p:-0}" "${fl:-0}" "${s:-0}"
}

# ---- info ------------------------------------------------------------------------------------------------
gpu_name=$(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null | head -n 1)
run info 30 bash -c 'nvidia-smi -L; nvcc --version | tail -n 2; cmake --version | head -n 1; ninja --version;
  c++ --version | head -n 1; command -v compute-sanitizer;
  python3 -c "import torch; print(\"torch\", torch.__version__, torch.cuda.is_available())"; true'  # report only

# ---- dependencies: OpenBLAS and GoogleTest from third_party/local when fetched -----------------------------
cmake_args=(-G Ninja -DGPT_CUDA=ON -DGPT_MPI=OFF "-DCMAKE_CUDA_ARCHITECTURES=${CUDA_ARCH:-90}")
blas="$root/third_party/local/openblas"
if [[ -d $blas ]]; then
  cmake_args+=("-DGPT_OPENBLAS_ROOT=$blas")
  export LD_LIBRARY_PATH="$blas/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  rt="$root/$build/runtime_libs"  # links to the runtime libraries this machine lacks, nothing else
  rm -rf "$rt" && mkdir -p "$rt"
  for lib in libgfortran.so.5 libquadmath.so.0 libgomp.so.1; do
    ldconfig -p 2>/dev/null | grep -q "$lib" || ln -s "$blas/lib/runtime/$lib" "$rt/$lib"
  done
  [[ -n $(ls -A "$rt") ]] && export LD_LIBRARY_PATH="$rt:$LD_LIBRARY_PATH"
fi
have_tests=1
gtest="$root/third_party/local/gtest/usr/lib/x86_64-linux-gnu/cmake/GTest"
if [[ -d $gtest ]]; then
  cmake_args+=("-DGTest_DIR=$gtest")
elif ! ls /usr/include/gtest/gtest.h /usr/local/include/gtest/gtest.h >/dev/null 2>&1; then
  have_tests=0
  cmake_args+=(-DGPT_TESTS=OFF)
fi

# ---- configure and build ---------------------------------------------------------------------------------
note="" run configure 120 cmake -S . -B "$build" "${cmake_args[@]}"
targets=(gpt)
((have_tests)) && targets+=(test_cuda test_ops)
note="targets: ${targets[*]}" run build 300 ninja -C "$build" -j "$(nproc)" "${targets[@]}"

# ---- tests -----------------------------------------------------------------------------------------------
for t in test_cuda test_ops; do
  if ((!have_tests)); then
    skip "$t" "no GoogleTest on this machine (run scripts/fetch_openblas.sh and carry third_party/local)"
  elif [[ ! -x $build/tests/$t ]]; then
    skip "$t" "not built"
  else
    run "$t" 150 "$build/tests/$t"
    add_result "$t" "$(gtest_counts "$t")"
  fi
done

# ---- benchmarks ------------------------------------------------------------------------------------------
bench() {  # name, then gpt bench flags
  local name=$1
  shift
  if [[ ! -x $build/gpt ]] || ! "$build/gpt" bench --help >/dev/null 2>&1; then
    skip "$name" "build/gpt has no working 'bench' subcommand"
    return
  fi
  note="$*" run "$name" 150 "$build/gpt" bench --device cuda "$@" --json
  add_result "$name" "$(last_json "$name")"
}
bench bench_d12 --config d12 -B 16 -T 1024 --steps 20
bench bench_d12_fused --config d12 -B 16 -T 1024 --steps 20 --attention fused
bench bench_d48_recompute --config d48 -B 4 -T 1024 --recompute full
bench bench_d48_offload --config d48 -B 4 -T 1024 --recompute full --offload optimizer

if python3 scripts/bench_pytorch.py --help 2>/dev/null | grep -q -- '--device'; then
  run bench_pytorch 150 env PYTHONUNBUFFERED=1 python3 scripts/bench_pytorch.py --device cuda --config d12 -B 16 \
    -T 1024 --json
  add_result bench_pytorch "$(last_json bench_pytorch)"
else
  skip bench_pytorch "scripts/bench_pytorch.py has no --device flag yet"
fi

# ---- memory checker over the twin tests, with the time that is left -----------------------------------------
if ((have_tests)) && command -v compute-sanitizer >/dev/null && [[ -x $build/tests/test_cuda ]]; then
  note="memcheck" run sanitize 240 compute-sanitizer --tool memcheck --error-exitcode 3 "$build/tests/test_cuda" \
    --gtest_filter='CudaTwin.*:-CudaTwin.AccumulateF32IsExact'
else
  skip sanitize "compute-sanitizer or test_cuda missing"
fi

# ---- summary ---------------------------------------------------------------------------------------------
elapsed=$(($(date +%s) - t_start))
{
  printf '{\n  "gpu": %s,\n  "budget_s": %s,\n  "elapsed_s": %s,\n  "stages": [\n' "$(json_str "$gpu_name")" \
    "$budget" "$elapsed"
  for i in "${!stages[@]}"; do printf '    %s%s\n' "${stages[$i]}" "$([[ $i -lt $((${#stages[@]} - 1)) ]] && echo ,)"; done
  printf '  ],\n  "results": {\n'
  for i in "${!results[@]}"; do printf '    %s%s\n' "${results[$i]}" "$([[ $i -lt $((${#results[@]} - 1)) ]] && echo ,)"; done
  printf '  }\n}\n'
} >"$json"
echo "gpu_check: ${elapsed} s; log $log; summary $json"
failed=$(printf '%s\n' "${stages[@]}" | grep -c '"status": "\(failed\|timeout\)"' || true)
((failed == 0))
