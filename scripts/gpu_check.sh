#!/usr/bin/env bash
# One call on a lent GPU machine (one H100 or H200: nvcc 13, CMake, ninja, python3 with torch 2.x; no network, maybe
# no OpenBLAS, GoogleTest or MPI) that settles: is the GPU path correct, and how fast is it against PyTorch on
# the same GPU. At most 420 s of script, build included. Stages, in order, each with its cap; a stage ends by
# the start plus the caps of every stage up to it (time an earlier stage left over flows on, never a later
# stage's cap):
#   info         10 s  what the machine has (GPU, driver, nvcc, compute-sanitizer, torch, kernel)
#   build       120 s  cmake (CUDA on, MPI off, sm_90) + ninja gpt test_cuda on every core; meanwhile, in the
#                      background, torch.compile fills its cache for the PyTorch peer (at most 90 s) and the
#                      stage waits for it (it must not share the GPU with the twin tests' memory checks).
#                      cuDNN comes from the system, else from torch's nvidia-cudnn wheel (-DGPT_CUDNN_ROOT);
#                      a gpt not linked with it fails the `cudnn` record, which names what was searched
#   twins        75 s  test_cuda: every CUDA op and whole d2 training steps against the CPU twin. A missing
#                      prerequisite (GoogleTest, OpenBLAS) or a skipped test is a failure, never a skip. About
#                      half of it is cuDNN compiling its attention plans (~2 s a shape; sm_90, cuDNN 9.19)
#   correctness  70 s  scripts/gpu_correctness.py: d12, B8 T256, 20 steps of `gpt train --device cuda` per
#                      attention path against PyTorch fp32 (and two bf16 runs as the noise floor) from the same
#                      llm.c model file on the same tokens, within a derived bf16 bound; every attention path
#                      against the others; `gpt memplan` == the ledger's peak of the same runs, to the byte
#   bench        50 s  gpt bench d12 -B 16 -T 1024, one per attention path (`gpt train --help` lists them):
#                      tokens/s, MFU; `gpt memplan --device cuda` against the bench's peak_device_mib, and
#                      `gpt memplan --time --hardware this` (the predicted ms/step on the datasheet of the GPU
#                      found, data/hardware/h100.json or h200.json, beside the measured one; recorded, not a gate)
#   trace        10 s  3 steps of d12 -B 16 -T 1024 (byte tokens) with --trace: the device-timed trace (compute,
#                      copy and comm streams as they ran), trace_d12_cuda.json in --out, beside the one the time
#                      model predicts for that step on the GPU's datasheet, trace_d12_predicted.json; the note counts
#                      each track's spans (a gate: a trace with no device-timed compute span fails)
#   torch_peer   50 s  scripts/bench_pytorch.py, the same model and batch at PyTorch's best: bf16 autocast,
#                      SDPA (causal), fused AdamW, torch.compile when it compiled within 90 s (else eager)
#   racecheck    35 s  compute-sanitizer --tool racecheck on the attention twin tests of our kernels (simple,
#                      fused; small shapes; cuDNN's kernels are NVIDIA's); where the sanitizer refuses the
#                      device ("device not supported", error 999) it is a skip
#   d48        (rest)  only with time left: gpt bench d48 -B 4 -T 1024 --recompute full, then with
#                      --offload optimizer
# Verdict: one line `gpu_check: PASS|FAIL ...` (twins, correctness, memplan, racecheck, d12 tokens/s and MFU
# per attention path, torch's tokens/s, the ratio gpt/torch), gpu_check.json (every stage and number),
# gpu_check.log (every stage's full output), correctness.json and correctness_gpt.log, in --out DIR
# (default $OUT when set, the lent machine's return folder, else build/gpu_check). Exit status non-zero when
# a correctness stage (build, twins, correctness, memplan, racecheck, a gpt bench) failed or could not run.
#
# Prerequisites the bare machine lacks come with the working tree: run scripts/fetch_openblas.sh here (OpenBLAS
# for the CPU twin, and GoogleTest, into the git-ignored third_party/local, ~40 MiB) and carry
# third_party/local. `scripts/gpu_check.sh --dry-run` (no GPU needed) prints this plan with its caps and checks
# the prerequisites that can be checked without a GPU; it exits non-zero when one is missing.
#
# Use:  scripts/gpu_check.sh [--dry-run] [--out DIR]
# Environment: BUILD_DIR (default build-gpu), PYTHON (default: the first of python3, /usr/bin/python3 that
# imports torch), CUDA_ARCH (default 90), GPU_CHECK_BUDGET_S (default 420).
set -uo pipefail  # no -e: a failing stage must not stop the later ones

root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root" || exit 2
dry=0
out_arg=""
while (($#)); do
  case "$1" in
    --dry-run) dry=1 ;;
    --out) out_arg=${2:?--out needs a directory}; shift ;;
    --out=*) out_arg=${1#--out=} ;;
    -h|--help) awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "$0"; exit 0 ;;
    *) echo "gpu_check.sh: unknown argument '$1' (expected --dry-run, --out DIR)" >&2; exit 2 ;;
  esac
  shift
done
build=${BUILD_DIR:-build-gpu}
budget=${GPU_CHECK_BUDGET_S:-420}
arch=${CUDA_ARCH:-90}
local_dir="$root/third_party/local"
fix_fetch="run scripts/fetch_openblas.sh on a Debian machine with network and carry third_party/local"

# ---- the plan: name, cap in seconds (0 = whatever time is left), what it does ------------------------------
plan=(
  "info|10|nvidia-smi, nvcc, compute-sanitizer, torch, kernel: what the machine has"
  "build|120|cmake (CUDA on, MPI off, sm_$arch) + ninja -j\$(nproc) gpt test_cuda; torch.compile warms its cache meanwhile (<= 90 s)"
  "twins|75|test_cuda: CUDA ops and d2 training steps vs the CPU twin (no skips allowed)"
  "correctness|70|gpu_correctness.py: d12 B8 T256, 20 steps, gpt (each attention path) vs PyTorch fp32, derived bf16 bound; memplan == ledger"
  "bench|50|gpt bench d12 -B 16 -T 1024 per attention path: tokens/s, MFU; memplan vs peak_device_mib; memplan --time (this GPU's datasheet) vs ms/step"
  "trace|10|gpt train d12 -B 16 -T 1024 --steps 3 --trace: the device-timed trace, and the predicted one (memplan --time --trace)"
  "torch_peer|50|bench_pytorch.py d12 -B 16 -T 1024: bf16 autocast, SDPA, fused AdamW, torch.compile if cached in time"
  "racecheck|35|compute-sanitizer racecheck, attention twin tests (skip only where the device is unsupported)"
  "d48|0|only with time left: gpt bench d48 -B 4 -T 1024 --recompute full, then + --offload optimizer"
)
cap_of() { local p; for p in "${plan[@]}"; do [[ ${p%%|*} == "$1" ]] && { p=${p#*|}; echo "${p%%|*}"; return; }; done; echo 0; }
# A stage runs until its planned end: the start plus the caps of every stage up to it. So a stage may use the
# time earlier stages did not, never a later stage's cap; d48 (cap 0) gets only what is left of the budget.
planned_end() {
  local p p2 sum=0
  for p in "${plan[@]}"; do
    p2=${p#*|}; sum=$((sum + ${p2%%|*}))
    [[ ${p%%|*} == "$1" ]] && break
  done
  echo $((t_start + sum))
}
until_end() { echo $(($(planned_end "$1") - $(date +%s))); }
print_plan() {
  local p name cap what sum=0
  printf 'gpu_check plan (budget %s s; each stage ends by the sum of the caps up to it, so it may use time\n' "$budget"
  printf 'that earlier stages left, never a later stage'"'"'s; d48 runs only on what is left):\n'
  for p in "${plan[@]}"; do
    name=${p%%|*}; p=${p#*|}; cap=${p%%|*}; what=${p#*|}
    sum=$((sum + cap))
    printf '  %-12s %5s  %s\n' "$name" "$([[ $cap == 0 ]] && echo rest || echo "${cap} s")" "$what"
  done
  printf '  %-12s %5s s (must be <= %s)\n' "sum of caps" "$sum" "$budget"
  ((sum <= budget))
}

# ---- prerequisites ---------------------------------------------------------------------------------------
blas_root=""   # -DGPT_OPENBLAS_ROOT, when OpenBLAS comes from third_party/local
blas_note=""
find_openblas() {
  if [[ -f $local_dir/openblas/include/cblas.h && -e $local_dir/openblas/lib/libopenblas.so.0 ]]; then
    blas_root="$local_dir/openblas"; blas_note="third_party/local/openblas"; return 0
  fi
  local inc lib
  for inc in /usr/include/x86_64-linux-gnu/openblas-openmp /usr/include/x86_64-linux-gnu/openblas-pthread /usr/include/openblas; do
    for lib in /usr/lib/x86_64-linux-gnu/openblas-openmp /usr/lib/x86_64-linux-gnu/openblas-pthread; do
      if [[ -f $inc/cblas.h ]] && ls "$lib"/libopenblas.so* >/dev/null 2>&1; then blas_note="system ($lib)"; return 0; fi
    done
  done
  blas_note="missing: CMakeLists.txt stops without OpenBLAS (the CPU twin needs it); $fix_fetch"
  return 1
}
gtest_dir=""   # -DGTest_DIR, when GoogleTest comes from third_party/local
gtest_note=""
find_gtest() {
  local d="$local_dir/gtest/usr/lib/x86_64-linux-gnu/cmake/GTest"
  if [[ -f $d/GTestConfig.cmake && -f $local_dir/gtest/usr/include/gtest/gtest.h ]]; then
    gtest_dir=$d; gtest_note="third_party/local/gtest"; return 0
  fi
  if ls /usr/include/gtest/gtest.h /usr/local/include/gtest/gtest.h >/dev/null 2>&1; then gtest_note="system"; return 0; fi
  gtest_note="missing: test_cuda cannot be built without GoogleTest; $fix_fetch"
  return 1
}
PY=${PYTHON:-}
py_note=""
find_python() {
  local c
  for c in ${PY:+"$PY"} python3 /usr/bin/python3; do
    if command -v "$c" >/dev/null 2>&1 && "$c" -c "import torch" >/dev/null 2>&1; then
      PY=$(command -v "$c"); py_note="$PY, torch $("$PY" -c 'import torch; print(torch.__version__)' 2>/dev/null)"; return 0
    fi
  done
  PY=$(command -v python3 || true)
  py_note="missing: no python3 with torch (tried ${PYTHON:+$PYTHON, }python3, /usr/bin/python3)"
  return 1
}

cudnn_root=""   # -DGPT_CUDNN_ROOT, when cuDNN comes from the Python wheel beside torch (nvidia-cudnn)
cudnn_note=""
find_cudnn() {  # after find_python: the wheel is found through $PY
  local d
  for d in /usr/local/cuda /usr/local/cuda/targets/x86_64-linux /usr; do
    [[ -f $d/include/cudnn_version.h ]] || continue
    if compgen -G "$d/lib*/libcudnn.so*" >/dev/null || compgen -G "$d/lib/x86_64-linux-gnu/libcudnn.so*" >/dev/null; then
      cudnn_note="system ($d)"; return 0
    fi
  done
  if [[ -n $PY ]]; then
    d=$("$PY" -c 'import nvidia.cudnn as m; print(list(m.__path__)[0])' 2>/dev/null)
    if [[ -n $d && -f $d/include/cudnn_version.h ]] && compgen -G "$d/lib/libcudnn.so*" >/dev/null; then
      cudnn_root=$d; cudnn_note="Python wheel ($d)"; return 0
    fi
  fi
  cudnn_note="missing: no cuDNN headers and library in /usr/local/cuda, /usr or $PY's nvidia-cudnn wheel"
  return 1
}

if ((dry)); then
  ok=1
  print_plan || { echo "gpu_check --dry-run: the caps sum to more than the ${budget} s budget"; ok=0; }
  echo "prerequisites:"
  find_openblas || ok=0; printf '  %-22s %s\n' "OpenBLAS (CPU twin)" "$blas_note"
  find_gtest || ok=0; printf '  %-22s %s\n' "GoogleTest" "$gtest_note"
  if [[ -n $blas_root ]]; then
    printf '  %-22s %s\n' "OpenBLAS runtime" "$(ls "$blas_root/lib/runtime" 2>/dev/null | tr '\n' ' ')(linked on the GPU machine only where missing)"
  fi
  find_python || ok=0; printf '  %-22s %s\n' "python + torch" "$py_note"
  find_cudnn; printf '  %-22s %s\n' "cuDNN" "here: $cudnn_note (the GPU machine's is found there: system, else torch's wheel)"
  if [[ -n $PY ]]; then
    for s in gpu_correctness.py bench_pytorch.py gpu_check_report.py; do
      if "$PY" -m py_compile "scripts/$s" 2>/dev/null; then printf '  %-22s %s\n' "$s" "compiles"
      else printf '  %-22s %s\n' "$s" "DOES NOT COMPILE"; ok=0; fi
    done
  fi
  for t in cmake ninja nvcc c++; do
    printf '  %-22s %s\n' "$t" "$(command -v "$t" || { [[ $t == nvcc && -x /usr/local/cuda/bin/nvcc ]] && echo /usr/local/cuda/bin/nvcc; } || echo "not here (the GPU machine has it)")"
  done
  printf '  %-22s %s\n' "compute-sanitizer" "$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null || echo 'not here (on the GPU machine: racecheck, or a skip where the device is unsupported)')"
  # What travels to the GPU machine: tracked and untracked-not-ignored files, plus third_party/local (carry).
  tree_bytes=$( { git ls-files -z; git ls-files -z --others --exclude-standard; } | xargs -0 stat -c %s 2>/dev/null | awk '{s+=$1} END {print s+0}')
  carry_bytes=$(du -sb "$local_dir" 2>/dev/null | cut -f1)
  total=$((tree_bytes + ${carry_bytes:-0}))
  limit=$((64 * 1048576))
  printf '  %-22s %s MiB (working tree %s MiB + third_party/local %s MiB; limit 64 MiB)\n' "travels" \
    "$((total / 1048576))" "$((tree_bytes / 1048576))" "$((${carry_bytes:-0} / 1048576))"
  ((total <= limit)) || { echo "  too large to travel"; ok=0; }
  echo "on the GPU machine: run with carry [\"third_party/local\"] the command: scripts/gpu_check.sh"
  if ((ok)); then echo "gpu_check --dry-run: ready"; exit 0; fi
  echo "gpu_check --dry-run: NOT READY (see above)"
  exit 1
fi

# ---- the real run ----------------------------------------------------------------------------------------
out_dir=${out_arg:-${OUT:-$root/build/gpu_check}}
mkdir -p "$out_dir" "$build"
work="$root/$build/gpu_check_work"
rm -rf "$work" && mkdir -p "$work/results"
log="$out_dir/gpu_check.log"
stages_tsv="$work/stages.tsv"
: >"$log"
: >"$stages_tsv"
t_start=$(date +%s)
deadline=$((t_start + budget))
print_plan | tee -a "$log"

# record NAME STATUS RC SECONDS GATE NOTE   (GATE 1: a failure fails the check)
record() {
  printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$1" "$2" "${3:-}" "${4:-0}" "$5" "${6//$'\t'/ }" >>"$stages_tsv"
  printf '%-22s %-8s rc=%-4s %7ss  %s\n' "$1" "$2" "${3:--}" "${4:-0}" "${6:-}"
  printf '=== [%s] %s (rc %s, %s s) %s\n' "$1" "$2" "${3:--}" "${4:-0}" "${6:-}" >>"$log"
}
elapsed_since() { awk -v a="$1" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }'; }
left() { echo $((deadline - $(date +%s))); }

# run NAME LIMIT CMD...: CMD under `timeout` (never past the budget), output in $work/NAME.out and the log.
# Sets run_rc and run_secs; returns the command's status (124/137 on timeout, 99 when no time was left).
run() {
  local name=$1 limit=$2 l
  shift 2
  l=$(left)
  run_secs=0
  if ((l < 5)); then run_rc=99; echo "[no time left in the ${budget} s budget]" >"$work/$name.out"; return 99; fi
  ((limit > l)) && limit=$l
  if ((limit < 1)); then run_rc=99; echo "[no time left in this stage's cap]" >"$work/$name.out"; return 99; fi
  printf '=== [%s] %s (timeout %s s)\n' "$name" "$*" "$limit" >>"$log"
  local t0
  t0=$(date +%s.%N)
  timeout --kill-after=5 "$limit" "$@" >"$work/$name.out" 2>&1
  run_rc=$?
  run_secs=$(elapsed_since "$t0")
  cat "$work/$name.out" >>"$log"
  return "$run_rc"
}
status_of() { case $1 in 0) echo ok ;; 99) echo "no-time" ;; 124|137) echo timeout ;; *) echo failed ;; esac; }
last_json() { grep -E '^\{.*\}$' "$1" 2>/dev/null | tail -n 1; }
save_result() { [[ -n $2 ]] && printf '%s\n' "$2" >"$work/results/$1.json"; }
report() { "$PY" "$root/scripts/gpu_check_report.py" "$@"; }

# ---- info -------------------------------------------------------------------------------------------------
find_python; py_ok=$?
find_openblas; blas_ok=$?
find_gtest; gtest_ok=$?
find_cudnn
sanitizer=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer /usr/local/cuda/compute-sanitizer/compute-sanitizer 2>/dev/null | head -n 1)
run info "$(until_end info)" bash -c 'nvidia-smi -L; nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm --format=csv;
  (nvcc --version || /usr/local/cuda/bin/nvcc --version) | tail -n 2; cmake --version | head -n 1; echo "ninja $(ninja --version)";
  c++ --version | head -n 1; echo "kernel $(uname -r) (4.4.0 = gVisor: no compute-sanitizer there)"; echo "cores $(nproc)";
  free -g | head -n 2; echo "sanitizer: '"$sanitizer"'"; ldconfig -p 2>/dev/null | grep -E "libcudnn\.so|libnvrtc\.so" | head -n 4; true'
record info "$(status_of $run_rc)" "$run_rc" "$run_secs" 0 "python: $py_note | OpenBLAS: $blas_note | GoogleTest: $gtest_note | cuDNN: $cudnn_note"
gpu_name=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -n 1)

# ---- torch.compile warm-up, in the background during the build ---------------------------------------------
export TORCHINDUCTOR_CACHE_DIR="$root/$build/inductor_cache" TRITON_CACHE_DIR="$root/$build/triton_cache"
peer_args=(--device cuda --config d12 -B 16 -T 1024)
warm_pid=""
if ((py_ok == 0)); then
  # niced: the build is on the critical path, the cache only saves the peer's compile time later
  timeout --kill-after=5 125 nice -n 10 env PYTHONUNBUFFERED=1 "$PY" scripts/bench_pytorch.py "${peer_args[@]}" --compile on \
    --warm-only --compile-timeout 90 --json >"$work/compile_warm.out" 2>&1 &
  warm_pid=$!
fi

# ---- build ------------------------------------------------------------------------------------------------
targets=(gpt)
# No SIMT emulator build here: on a GPU the CUDA suite runs for real.
cmake_args=(-G Ninja -DCMAKE_BUILD_TYPE=Release -DGPT_CUDA=ON -DGPT_MPI=OFF -DGPT_SIMT=OFF "-DCMAKE_CUDA_ARCHITECTURES=$arch")
[[ -n $blas_root ]] && cmake_args+=("-DGPT_OPENBLAS_ROOT=$blas_root")
if [[ -n $cudnn_root ]]; then  # the wheel's cuDNN: build against it, and let its engines find each other
  cmake_args+=("-DGPT_CUDNN_ROOT=$cudnn_root")
  export LD_LIBRARY_PATH="$cudnn_root/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi
if ((gtest_ok == 0)); then
  [[ -n $gtest_dir ]] && cmake_args+=("-DGTest_DIR=$gtest_dir")
  targets+=(test_cuda)
else
  cmake_args+=(-DGPT_TESTS=OFF)
fi
# Libraries this machine's loader cannot find, linked one by one into a runtime folder on LD_LIBRARY_PATH (never
# a whole CUDA lib folder, which would put its cuBLAS ahead of torch's own in the PyTorch processes):
#  - OpenBLAS's own runtime, where it comes from third_party/local;
#  - NVRTC, which cuDNN's runtime-compiled engines dlopen by name (LD_LIBRARY_PATH and ld.so's cache, not
#    gpt's RUNPATH): torch's own (its nvidia-cuda-nvrtc wheel, so both sides load the same one), else the
#    toolkit's. Every major version found there, since a wheel's cuDNN built for CUDA 12 asks for
#    libnvrtc.so.12 even in a CUDA 13 build.
rt="$root/$build/runtime_libs"
rm -rf "$rt" && mkdir -p "$rt"
ld_cache=$(ldconfig -p 2>/dev/null)  # what the loader finds without help
if [[ -n $blas_root ]]; then
  export LD_LIBRARY_PATH="$blas_root/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  for lib in libgfortran.so.5 libquadmath.so.0 libgomp.so.1; do
    grep -q "$lib" <<<"$ld_cache" || ln -s "$blas_root/lib/runtime/$lib" "$rt/$lib"
  done
fi
# torch's wheels: CUDA 12 ones put NVRTC in nvidia/cuda_nvrtc/lib, CUDA 13 ones in nvidia/cu13/lib.
mapfile -t wheel_nvrtc < <([[ -n $PY ]] && "$PY" -c 'import nvidia
for p in nvidia.__path__:
    print(p + "/cuda_nvrtc/lib"); print(p + "/cu13/lib")' 2>/dev/null)
declare -A nvrtc_from  # libnvrtc.so.13 / libnvrtc-builtins.so.13 -> the one folder that supplies it
for d in "${wheel_nvrtc[@]}" /usr/local/cuda/lib64 /usr/local/cuda/lib; do
  for f in "$d"/libnvrtc*.so.[0-9]*; do  # by file name: the loader asks for the soname, builtins for .so.13.0
    [[ -e $f ]] || continue
    major=$(basename "$f" | sed -E 's/(\.so\.[0-9]+).*/\1/')  # libnvrtc.so.13.0.88 -> libnvrtc.so.13
    grep -qE "^[[:space:]]+${major//./\\.}[ .]" <<<"$ld_cache" && continue
    [[ ${nvrtc_from[$major]:-$d} == "$d" ]] || continue
    nvrtc_from[$major]=$d
    ln -sf "$f" "$rt/"
  done
done
[[ -n $(ls -A "$rt") ]] && export LD_LIBRARY_PATH="$rt${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
build_start=$(date +%s)
build_cap=$(until_end build)
build_ok=0
if ((blas_ok != 0)); then
  record build failed "" 0 1 "OpenBLAS $blas_note"
else
  if run configure "$build_cap" cmake -S . -B "$build" "${cmake_args[@]}"; then
    run compile "$(until_end build)" ninja -C "$build" -j "$(nproc)" "${targets[@]}"
  fi
  note="targets: ${targets[*]}"
  ((gtest_ok != 0)) && note+=" (no test_cuda: GoogleTest $gtest_note)"
  record build "$(status_of $run_rc)" "$run_rc" "$(($(date +%s) - build_start))" 1 "$note"
  ((run_rc == 0)) && build_ok=1
fi
if [[ -n $warm_pid ]]; then  # the twin tests compare driver and ledger memory: nothing else on the GPU
  wait "$warm_pid"
  warm_rc=$?
  warm=$(last_json "$work/compile_warm.out")
  cat "$work/compile_warm.out" >>"$log"
  save_result compile_warm "$warm"
  record compile_warm "$([[ $warm == *'"warm": true'* ]] && echo ok || echo failed)" "$warm_rc" \
    "$(($(date +%s) - build_start))" 0 "${warm:-no result: $(tail -n 1 "$work/compile_warm.out")}"
fi
gpt_bin="$build/gpt"
have_gpt=0
((build_ok)) && [[ -x $gpt_bin ]] && have_gpt=1  # never a binary left from an earlier run
# The attention paths (`gpt train --help` lists them). The cudnn one needs a build linked with cuDNN: say so
# here, by its cause, rather than only through the cudnn twin test and bench failing later.
paths=(simple)
if ((have_gpt)); then
  p=$("$gpt_bin" train --help 2>/dev/null | grep -oE -- '--attention [a-z0-9_]+(\|[a-z0-9_]+)+' | head -n 1 | cut -d' ' -f2)
  [[ -n $p ]] && IFS='|' read -r -a paths <<<"$p"
  linked=$(ldd "$gpt_bin" 2>/dev/null | grep -m1 'libcudnn\.so' | tr -s ' \t' ' ')
  if [[ -n $linked ]]; then
    record cudnn ok "" 0 1 "$linked | $(grep -m1 -- '-- cuDNN' "$work/configure.out" 2>/dev/null)"
  else
    record cudnn failed "" 0 1 "gpt is not linked with cuDNN, so the cudnn attention path cannot run (cuDNN: $cudnn_note; cmake: $(grep -m1 -i 'cudnn' "$work/configure.out" 2>/dev/null || echo 'no cuDNN line'))"
  fi
fi

# ---- 1. twin tests ----------------------------------------------------------------------------------------
if ((gtest_ok != 0)); then
  record twins failed "" 0 1 "not run: GoogleTest $gtest_note"
elif ((!build_ok)) || [[ ! -x $build/tests/test_cuda ]]; then
  record twins failed "" 0 1 "not run: test_cuda was not built (see build)"
else
  # Not CudnnGraphs.*: the deviceless planning check (~15 s of CPU) runs in CI on every commit, and here the
  # cudnn twin tests execute the same graphs on the GPU.
  run twins "$(until_end twins)" "$build/tests/test_cuda" --gtest_filter='-CudnnGraphs.*'
  g=$(report gtest "$work/twins.out" 2>>"$log")
  save_result twins "$g"
  gstatus=$(status_of $run_rc)
  [[ $g == *'"clean": true'* ]] || { [[ $gstatus == ok ]] && gstatus=failed; }
  record twins "$gstatus" "$run_rc" "$run_secs" 1 "$(report gtest-line "$work/results/twins.json" 2>/dev/null || echo "$g")"
fi

# ---- 2. correctness against PyTorch -------------------------------------------------------------------------
if ((py_ok != 0)); then
  record correctness failed "" 0 1 "not run: $py_note"
elif ((!have_gpt)); then
  record correctness failed "" 0 1 "not run: gpt was not built"
else
  run correctness "$(until_end correctness)" env PYTHONUNBUFFERED=1 "$PY" scripts/gpu_correctness.py --gpt "$gpt_bin" \
    --device cuda --workdir "$work/correctness" --json "$out_dir/correctness.json" --timeout 45
  cp "$work/correctness/gpu_correctness.log" "$out_dir/correctness_gpt.log" 2>/dev/null
  [[ -f $out_dir/correctness.json ]] && cp "$out_dir/correctness.json" "$work/results/correctness.json"
  note=$(grep -E '^gpu_correctness: (PASS|FAIL)' "$work/correctness.out" | tail -n 1)
  [[ -n $note ]] || note=$(tail -n 1 "$work/correctness.out")
  note+=$(grep -E '^ +\[FAIL\]' "$work/correctness.out" | head -n 3 | tr -s ' ' | tr '\n' ';')
  record correctness "$(status_of $run_rc)" "$run_rc" "$run_secs" 1 "$note"
fi

# ---- 3. speed: gpt bench per attention path, memplan vs the bench's peak, then the PyTorch peer ---------------
bench_end=$(planned_end bench)
bench_B=16
for p in "${paths[@]}"; do
  name="bench_$p"
  if ((!have_gpt)); then record "$name" failed "" 0 1 "not run: gpt was not built"; continue; fi
  limit=$((bench_end - $(date +%s)))
  ((limit > 30)) && limit=30
  if ((limit < 5)); then record "$name" no-time "" 0 1 "the bench stage's time was used up"; continue; fi
  run "$name" "$limit" "$gpt_bin" bench --device cuda --config d12 -B "$bench_B" -T 1024 --steps 20 --attention "$p" --json
  note="d12 B$bench_B T1024"
  if ((run_rc != 0)) && grep -qiE 'out of memory|does not fit|exceeds' "$work/$name.out" && ((bench_B > 1)); then
    bench_B=$((bench_B / 2))  # the largest B that fits
    run "$name" "$limit" "$gpt_bin" bench --device cuda --config d12 -B "$bench_B" -T 1024 --steps 20 --attention "$p" --json
    note="d12 B$bench_B T1024 (B16 did not fit)"
  fi
  b=$(last_json "$work/$name.out")
  save_result "$name" "$b"
  record "$name" "$(status_of $run_rc)" "$run_rc" "$run_secs" 1 "$note ${b:-no JSON: $(tail -n 1 "$work/$name.out")}"
  if [[ -n $b ]]; then
    timeout --kill-after=5 30 "$gpt_bin" memplan --device cuda --config d12 -B "$bench_B" -T 1024 --attention "$p" \
      --json >"$work/memplan_$p.out" 2>&1
    cat "$work/memplan_$p.out" >>"$log"
    m=$(report peak "$work/memplan_$p.out" "$work/results/$name.json" 2>&1)
    mrc=$?
    save_result "memplan_$p" "$(report peak --json "$work/memplan_$p.out" "$work/results/$name.json" 2>/dev/null)"
    record "memplan_$p" "$( ((mrc == 0)) && echo ok || echo failed)" "$mrc" 0 1 "$m"
    # The time model's prediction for the same run on this GPU's datasheet (by its name: h100.json, h200.json),
    # beside the measured step (pure arithmetic, well under a second; not a gate: it records how far the model
    # is from this GPU).
    timeout --kill-after=5 30 "$gpt_bin" memplan --device cuda --config d12 -B "$bench_B" -T 1024 --attention "$p" \
      --time --hardware this --json >"$work/time_model_$p.out" 2>&1
    trc=$?
    tm=$(last_json "$work/time_model_$p.out")
    save_result "time_model_$p" "$tm"
    pred_ms=$(printf '%s' "$tm" | grep -oE '"step_ms": [0-9.e+-]+' | head -n 1 | awk '{print $2}')
    hw_file=$(printf '%s' "$tm" | grep -oE '"hardware_file": "[^"]*"' | head -n 1 | cut -d'"' -f4)
    [[ -n $hw_file ]] || hw_file="no datasheet: $(tail -n 1 "$work/time_model_$p.out")"
    meas_ms=$(printf '%s' "$b" | grep -oE '"ms_per_step": [0-9.e+-]+' | head -n 1 | awk '{print $2}')
    record "time_model_$p" "$( ((trc == 0)) && [[ -n $pred_ms ]] && echo ok || echo failed)" "$trc" 0 0 \
      "predicted ${pred_ms:-?} ms/step on ${hw_file#"$root/"}, measured ${meas_ms:-?} ms/step$(awk -v p="$pred_ms" -v m="$meas_ms" 'BEGIN { if (p > 0 && m > 0) printf " (predicted/measured %.2f)", p / m }')"
  fi
done

# ---- 3b. the device-timed trace of d12 steps, beside the trace the time model predicts ------------------------
if ((!have_gpt)); then
  record trace failed "" 0 1 "not run: gpt was not built"
else
  "$gpt_bin" tokenize --tokenizer byte --input data/tinyshakespeare/input.txt --out "$work/ts_byte" >>"$log" 2>&1
  run trace "$(until_end trace)" "$gpt_bin" train --device cuda --config d12 -B 16 -T 1024 --steps 3 --sample-tokens 0 \
    --train "$work/ts_byte/train_*.bin" --trace "$out_dir/trace_d12_cuda.json"
  trc=$run_rc
  tsecs=$run_secs
  timeout --kill-after=5 20 "$gpt_bin" memplan --device cuda --config d12 --vocab 256 -B 16 -T 1024 --time \
    --hardware this --trace "$out_dir/trace_d12_predicted.json" >>"$log" 2>&1
  tnote=$(report trace "$out_dir/trace_d12_cuda.json" 2>&1)
  tok=$?
  record trace "$( ((trc == 0 && tok == 0)) && echo ok || status_of $( ((trc != 0)) && echo $trc || echo 1))" "$trc" \
    "$tsecs" 1 "$tnote"
fi

if ((py_ok != 0)); then
  record torch_peer failed "" 0 0 "not run: $py_note"
else
  compile=off
  [[ $(cat "$work/results/compile_warm.json" 2>/dev/null) == *'"warm": true'* ]] && compile=on
  # MFU against the peak gpt bench measured against (its JSON names it), so that both MFUs share a denominator
  peak=$(cat "$work"/results/bench_*.json 2>/dev/null | grep -oE '"peak_tflops_per_rank": [0-9.e+-]+' | head -n 1 | awk '{print $2}')
  [[ -n $peak ]] && peer_args+=(--peak-tflops "$peak")
  run torch_peer "$(until_end torch_peer)" env PYTHONUNBUFFERED=1 "$PY" scripts/bench_pytorch.py "${peer_args[@]}" \
    --steps 20 --warmup 3 --compile "$compile" --compile-timeout 45 --json
  t=$(last_json "$work/torch_peer.out")
  save_result torch_peer "$t"
  record torch_peer "$(status_of $run_rc)" "$run_rc" "$run_secs" 0 "compile $compile (warm-up: $(cut -c1-120 "$work/results/compile_warm.json" 2>/dev/null || echo none)) ${t:0:200}${t:-no JSON: $(tail -n 1 "$work/torch_peer.out")}"
fi

# ---- 4. racecheck on the attention twin tests -----------------------------------------------------------------
if ((gtest_ok != 0)) || ((!build_ok)) || [[ ! -x $build/tests/test_cuda ]]; then
  record racecheck failed "" 0 1 "not run: test_cuda was not built (GoogleTest $gtest_note)"
elif [[ -z $sanitizer ]]; then
  record racecheck failed "" 0 1 "not run: compute-sanitizer is not on this machine (PATH, /usr/local/cuda/bin)"
else
  # The attention twin tests (small shapes) of our own kernels: not the whole-training tests, which racecheck
  # slows past the cap, and not cuDNN's, whose runtime-compiled kernels are NVIDIA's to check.
  run racecheck "$(until_end racecheck)" "$sanitizer" --tool racecheck --error-exitcode 3 --print-limit 50 \
    "$build/tests/test_cuda" --gtest_filter='CudaTwin.*Attention*:-*Cudnn*'
  r=$(report racecheck "$work/racecheck.out" "$run_rc" 2>>"$log")
  save_result racecheck "$r"
  rs=$(report field "$work/results/racecheck.json" status)
  record racecheck "${rs:-failed}" "$run_rc" "$run_secs" 1 "$(report field "$work/results/racecheck.json" note)"
fi

# ---- 5. with time left: d48 ---------------------------------------------------------------------------------
for lever in "recompute" "offload"; do
  name="bench_d48_$lever"
  extra=(--recompute full)
  [[ $lever == offload ]] && extra+=(--offload optimizer)
  if ((!have_gpt)); then record "$name" skipped "" 0 0 "gpt was not built"; continue; fi
  if (($(left) < 40)); then record "$name" skipped "" 0 0 "only $(left) s of the ${budget} s budget left"; continue; fi
  run "$name" $(($(left) - 5)) "$gpt_bin" bench --device cuda --config d48 -B 4 -T 1024 --steps 5 "${extra[@]}" --json
  b=$(last_json "$work/$name.out")
  save_result "$name" "$b"
  record "$name" "$(status_of $run_rc)" "$run_rc" "$run_secs" 0 "${b:-no JSON: $(tail -n 1 "$work/$name.out")}"
done

# ---- verdict ----------------------------------------------------------------------------------------------
elapsed=$(($(date +%s) - t_start))
failed=$(awk -F'\t' '$5 == 1 && $2 != "ok" && $2 != "skipped"' "$stages_tsv" | wc -l)
if [[ -n $PY ]] && verdict=$(report summary --stages "$stages_tsv" --results "$work/results" --out "$out_dir/gpu_check.json" \
  --gpu "$gpu_name" --budget "$budget" --elapsed "$elapsed" 2>>"$log"); then
  :
else  # no python: the stages alone
  verdict="gpu_check: $( ((failed == 0)) && echo PASS || echo FAIL) (no python for the summary; see gpu_check.log)"
  { printf '{"gpu": "%s", "elapsed_s": %s, "stages": [' "$gpu_name" "$elapsed"
    awk -F'\t' '{printf "%s{\"name\": \"%s\", \"status\": \"%s\"}", NR > 1 ? ", " : "", $1, $2}' "$stages_tsv"
    printf ']}\n'; } >"$out_dir/gpu_check.json"
fi
echo "$verdict" | tee -a "$log"
echo "gpu_check: ${elapsed} s; log $log; summary $out_dir/gpu_check.json"
((failed == 0))
