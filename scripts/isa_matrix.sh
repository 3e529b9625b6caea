#!/usr/bin/env bash
# The test suites under every instruction set this CPU can run. Our kernels are vectorised by the compiler
# for GPT_MARCH, so their fp32 results (and the parity tests' noise floor) depend on it; OpenBLAS picks its
# own kernels at run time whatever GPT_MARCH says. For each target:
#   x86-64 (always on x86-64), x86-64-v3 (AVX2: avx avx2 bmi1 bmi2 fma movbe f16c abm/lzcnt), x86-64-v4
#   (AVX-512: avx512f avx512bw avx512cd avx512dq avx512vl), native (always)
# it builds test_fsdp, test_train and gpt (CPU only) into build-isa-<target>, runs the FSDP suite at 1..4
# ranks (ctest -R fsdp_np) and the trainer suite (the test_train binary, with ctest's environment), and
# prints two tables: every suite's result and time, and the parity measurements the tests print
# ("[parity]" lines: the noise floor, the N-rank difference, its ratio to the bound; pass <= 1).
# OPENBLAS_CORETYPE is left as the machine sets it. Exits non-zero when any build or suite fails.
#   scripts/isa_matrix.sh [TARGET...]      (default: every target this CPU can run)
#   LOG_DIR=dir  logs and parity.tsv (default: build-isa-logs)
# Builds one target at a time with scripts/build.sh (-j nproc). On 2 busy cores the four targets took 54
# minutes: per target a 3.5-5 minute build, 8-13 minutes of FSDP suites and under a minute of trainer suite.
set -uo pipefail
cd "$(dirname "$0")/.."
logs=${LOG_DIR:-build-isa-logs}
mkdir -p "$logs"
logs=$(cd "$logs" && pwd)

# --- which targets this CPU can execute --------------------------------------------------------
flags=" $(grep -m1 '^flags' /proc/cpuinfo 2>/dev/null | cut -d: -f2) "
has() { for f in "$@"; do [[ "$flags" == *" $f "* ]] || return 1; done; }
can_run() {
  case "$1" in
    native) return 0 ;;
    x86-64) [ "$(uname -m)" = x86_64 ] ;;
    x86-64-v3) can_run x86-64 && has avx avx2 bmi1 bmi2 fma movbe f16c && { has abm || has lzcnt; } ;;
    x86-64-v4) can_run x86-64-v3 && has avx512f avx512bw avx512cd avx512dq avx512vl ;;
    *) echo "error: unknown target '$1' (expected x86-64, x86-64-v3, x86-64-v4 or native)" >&2; exit 2 ;;
  esac
}
targets=()
for t in ${@:-x86-64 x86-64-v3 x86-64-v4 native}; do
  if can_run "$t"; then targets+=("$t"); else echo "skip $t: this CPU cannot run it" >&2; fi
done
[ ${#targets[@]} -gt 0 ] || { echo "error: no target to run" >&2; exit 2; }
echo "targets: ${targets[*]}   OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-<unset>}   logs: $logs"

# --- build and run -------------------------------------------------------------------------------
results=()  # "target suite result seconds"
failed=0
: > "$logs/parity.tsv"
record() {  # target suite rc seconds log
  local res=pass
  [ "$3" = 0 ] || { res=FAIL; failed=1; }
  results+=("$1 $2 $res $4")
  printf '%-10s %-9s %-4s %5ss   (%s)\n' "$1" "$2" "$res" "$4" "$5"
  # "[parity] k=v ..." lines (ctest -V prefixes them with "N: ") -> target suite k=v ...
  sed -n 's/^\([0-9]*: \)\{0,1\}\[parity\] //p' "$5" | sed "s/^/target=$1 suite=$2 /" >> "$logs/parity.tsv"
}
start_all=$SECONDS
for t in "${targets[@]}"; do
  dir="build-isa-$t"
  t0=$SECONDS
  env -u GPT_PORTABLE BUILD_DIR="$dir" GPT_MARCH="$t" GPT_CUDA=OFF scripts/build.sh test_fsdp test_train gpt \
    > "$logs/$t.build.log" 2>&1
  rc=$?
  record "$t" build $rc $((SECONDS - t0)) "$logs/$t.build.log"
  [ $rc = 0 ] || continue
  grep -q -- "-march=$t" "$dir/build.ninja" || { echo "error: $dir is not built with -march=$t" >&2; failed=1; }
  for np in 1 2 3 4; do
    t0=$SECONDS
    # a timeout under a loaded machine is retried once; a failure is not
    ctest --test-dir "$dir" -R "^fsdp_np${np}\$" -V --repeat after-timeout:2 > "$logs/$t.fsdp_np$np.log" 2>&1
    rc=$?
    if [ $rc = 0 ] && ! grep -q "^100% tests passed" "$logs/$t.fsdp_np$np.log"; then rc=1; fi  # none ran
    record "$t" "fsdp_np$np" $rc $((SECONDS - t0)) "$logs/$t.fsdp_np$np.log"
  done
  t0=$SECONDS
  (cd "$dir" && OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 tests/test_train) > "$logs/$t.train.log" 2>&1
  record "$t" train $? $((SECONDS - t0)) "$logs/$t.train.log"
done

# --- tables ----------------------------------------------------------------------------------------
echo
echo "== suites"
printf '%-10s %-10s %-6s %8s\n' target suite result seconds
for r in "${results[@]}"; do printf '%-10s %-10s %-6s %8s\n' $r; done
echo
echo "== parity: per target, ranks and model, the worst over the cases (strategies x sync) of each"
echo "   floor = the fp32 noise floor measured by the test, diff = N ranks vs one process,"
echo "   ratio = diff / (multiple x floor), pass <= 1"
awk '
  { delete kv; for (i = 1; i <= NF; i++) { split($i, p, "="); kv[p[1]] = p[2] }
    k = kv["target"] " " kv["ranks"] " " kv["model"]
    if (!(k in n)) { order[++nk] = k; pd[k] = kv["params_diff"]; ld[k] = kv["loss_diff"] }
    n[k]++; pf[k] = kv["params_floor"]; mult[k] = kv["multiple"]
    if (kv["params_diff"] + 0 > pd[k] + 0) pd[k] = kv["params_diff"]
    if (kv["params_ratio"] + 0 >= pr[k] + 0) { pr[k] = kv["params_ratio"]; pc[k] = kv["case"] }
    if (kv["loss_diff"] + 0 > ld[k] + 0) ld[k] = kv["loss_diff"]
    if (kv["loss_ratio"] + 0 >= lr[k] + 0) { lr[k] = kv["loss_ratio"]; lf[k] = kv["loss_floor"] }
    if (kv["params_ratio"] + 0 > worst) { worst = kv["params_ratio"]; wk = $0 }
    if (kv["loss_ratio"] + 0 > worst) { worst = kv["loss_ratio"]; wk = $0 }
  }
  END {
    printf "%-10s %5s %-5s %5s | %10s %10s %7s %-16s | %10s %10s %7s\n", "target", "ranks", "model", "cases",
           "par.floor", "par.diff", "ratio", "(worst case)", "loss.floor", "loss.diff", "ratio"
    for (i = 1; i <= nk; i++) { k = order[i]; split(k, a, " ")
      printf "%-10s %5s %-5s %5d | %10s %10s %7s %-16s | %10s %10s %7s\n", a[1], a[2], a[3], n[k],
             pf[k], pd[k], pr[k], pc[k], lf[k], ld[k], lr[k] }
    if (nk) printf "\nworst ratio to the bound: %s (multiple %s)\n  %s\n", worst, mult[order[1]], wk
  }' "$logs/parity.tsv"
echo
echo "all parity lines: $logs/parity.tsv; total $((SECONDS - start_all)) s"
if [ $failed != 0 ]; then echo "isa_matrix: FAILED (see the logs above)"; exit 1; fi
echo "isa_matrix: all suites passed"
