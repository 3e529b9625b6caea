#!/usr/bin/env bash
# Smoke test of the measurement toolkit: runs every scaling script with --quick into a temporary folder
# and checks that each wrote its CSV with a header and at least one data row, and its PNG and results.md;
# also plots the memory timeline of a real 2-rank trace with scripts/plot_memory.py. Exits non-zero on
# the first script that fails or leaves an empty CSV.
#   usage: scripts/scaling/run_all_quick.sh [--gpt PATH]     (default build/gpt; GPT=PATH works too)
set -euo pipefail
cd "$(dirname "$0")/../.."
gpt="${GPT:-build/gpt}"
if [ "${1:-}" = "--gpt" ]; then
  [ $# -ge 2 ] || { echo "run_all_quick.sh: error: --gpt needs a path" >&2; exit 2; }
  gpt="$2"
elif [ $# -gt 0 ]; then
  echo "run_all_quick.sh: error: unknown argument '$1' (usage: run_all_quick.sh [--gpt PATH])" >&2
  exit 2
fi
[ -x "$gpt" ] || { echo "run_all_quick.sh: error: --gpt $gpt: no executable there" >&2; exit 2; }
py=/usr/bin/python3
[ -x "$py" ] || py=python3
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

check_csv() {  # FILE: header + at least one row
  local f="$1"
  [ -s "$f" ] || { echo "FAIL: $f missing or empty" >&2; return 1; }
  local lines
  lines=$(grep -c . "$f")
  [ "$lines" -ge 2 ] || { echo "FAIL: $f has a header but no rows" >&2; return 1; }
  head -1 "$f" | grep -q , || { echo "FAIL: $f has no CSV header" >&2; return 1; }
  echo "ok: $f ($((lines - 1)) rows)"
}

for name in zero_memory comm_volume levers loss_vs_size throughput isoflop; do
  echo "== $name --quick"
  start=$(date +%s)
  if ! "$py" "scripts/scaling/$name.py" --gpt "$gpt" --out "$tmp/$name" --quick > "$tmp/$name.log" 2>&1; then
    tail -20 "$tmp/$name.log" >&2
    echo "FAIL: $name.py --quick exited non-zero" >&2
    exit 1
  fi
  check_csv "$tmp/$name/$name.csv"
  for f in "$name.png" results.md; do
    [ -s "$tmp/$name/$f" ] || { echo "FAIL: $name wrote no $f" >&2; exit 1; }
  done
  echo "   $(( $(date +%s) - start )) s"
done

echo "== isoflop --quick --resume --seeds 1337,1338 --seeds-below 6e9: a second seed at the two smaller budgets only"
start=$(date +%s)
mkdir -p "$tmp/isoflop_seeds" && cp "$tmp/isoflop/isoflop.csv" "$tmp/isoflop_seeds/"
"$py" scripts/scaling/isoflop.py --gpt "$gpt" --out "$tmp/isoflop_seeds" --quick --resume --seeds 1337,1338 --seeds-below 6e9 \
  > "$tmp/isoflop_seeds.log" 2>&1 || { tail -20 "$tmp/isoflop_seeds.log" >&2; echo "FAIL: isoflop --seeds-below" >&2; exit 1; }
seeded=$(awk -F, 'NR == 1 {for (i = 1; i <= NF; i++) col[$i] = i; next}
  $col["phase"] == "isoflop" && $col["seed"] == 1338 {print $col["budget"]}' "$tmp/isoflop_seeds/isoflop.csv" | sort -u | tr '\n' ' ')
[ "$seeded" = "3e+09 6e+09 " ] || { echo "FAIL: seed 1338 ran at budgets '$seeded', expected 3e+09 and 6e+09 only" >&2; exit 1; }
echo "ok: seed 1338 at budgets $seeded($(( $(date +%s) - start )) s)"

echo "== time_model: measure --quick (calibrate, predict, measure), its plot, a sweep and the published points"
start=$(date +%s)
tm="$tmp/time_model"
"$py" scripts/scaling/time_model_measure.py --gpt "$gpt" --out "$tm" --quick > "$tmp/tm.log" 2>&1 \
  || { tail -20 "$tmp/tm.log" >&2; echo "FAIL: time_model_measure.py --quick" >&2; exit 1; }
check_csv "$tm/measured.csv"
"$py" scripts/scaling/time_model_edge.py --gpt "$gpt" --out "$tm" --quick > "$tmp/tm_edge.log" 2>&1 \
  || { tail -20 "$tmp/tm_edge.log" >&2; echo "FAIL: time_model_edge.py --quick" >&2; exit 1; }
check_csv "$tm/edge_ablation.csv"
"$py" scripts/scaling/time_model.py measured --gpt "$gpt" --out "$tm" > /dev/null
"$py" scripts/scaling/time_model.py sweep --gpt "$gpt" --out "$tm" --hardware data/hardware/h100.json --config d12 \
  --world-list 1,8,64 > /dev/null
check_csv "$tm/sweep_d12_h100.csv"
"$py" scripts/scaling/time_model_published.py --gpt "$gpt" --out "$tm" > /dev/null
check_csv "$tm/published.csv"
for f in measured_vs_predicted.png measured.md sweep_d12_h100.png published.md edge_ablation.md; do
  [ -s "$tm/$f" ] || { echo "FAIL: time_model wrote no $f" >&2; exit 1; }
done
"$py" scripts/scaling/prefetch_depth.py --gpt "$gpt" --out "$tm" --quick > "$tmp/pd.log" 2>&1 \
  || { tail -20 "$tmp/pd.log" >&2; echo "FAIL: prefetch_depth.py --quick" >&2; exit 1; }
check_csv "$tm/prefetch_depth.csv"
"$gpt" memplan --device cuda --config d12 --world 8 -B 4 -T 1024 --time --hardware data/hardware/h100.json \
  --trace "$tm/predicted.json" > /dev/null
# (its whole output first: grep -q stops reading at the match, and under pipefail the writer's broken pipe failed
# the line now and then)
reading=$("$py" scripts/scaling/trace_reading.py "$tm/predicted.json") && grep -q "collectives on the comm stream" <<< "$reading" \
  || { echo "FAIL: trace_reading.py on a predicted trace" >&2; exit 1; }
echo "   $(( $(date +%s) - start )) s"

echo "== wrap_sweep --quick and activation_offload --quick (measured against memplan and the time model)"
start=$(date +%s)
for name in wrap_sweep activation_offload; do
  "$py" "scripts/scaling/$name.py" --gpt "$gpt" --out "$tmp/$name" --quick > "$tmp/$name.log" 2>&1 \
    || { tail -20 "$tmp/$name.log" >&2; echo "FAIL: $name.py --quick" >&2; exit 1; }
  check_csv "$tmp/$name/$name.csv"
  [ -s "$tmp/$name/$name.md" ] || { echo "FAIL: $name wrote no $name.md" >&2; exit 1; }
done
[ -s "$tmp/wrap_sweep/wrap_sweep.png" ] || { echo "FAIL: wrap_sweep wrote no wrap_sweep.png" >&2; exit 1; }
check_csv "$tmp/activation_offload/activation_offload_gpu.csv"
echo "   $(( $(date +%s) - start )) s"

echo "== impossible configurations exit non-zero with a one-line message"
expect_error() {  # COMMAND...: must exit non-zero with "error:" in its output, before running anything
  if "$@" > "$tmp/bad.log" 2>&1; then
    echo "FAIL: '$*' succeeded but should have been refused" >&2
    exit 1
  fi
  grep -q "error:" "$tmp/bad.log" || { echo "FAIL: '$*' failed without an error message" >&2; exit 1; }
  echo "ok: $(grep error: "$tmp/bad.log" | head -1)"
}
s=scripts/scaling
expect_error "$py" $s/zero_memory.py --gpt "$gpt" --out "$tmp/bad" --ranks 1,16
expect_error "$py" $s/zero_memory.py --gpt "$gpt" --out "$tmp/bad" --strategies hybrid --shard-group 3 --ranks 2,4
expect_error "$py" $s/comm_volume.py --gpt "$gpt" --out "$tmp/bad" --configs d2,x7
expect_error "$py" $s/throughput.py --gpt "$gpt" --out "$tmp/bad" --global-batch 8 --ranks 1,3
expect_error "$py" $s/loss_vs_size.py --gpt "$gpt" --out "$tmp/bad" --tokens 1000 -B 8 -T 64
expect_error "$py" $s/levers.py --gpt "$tmp/no_such_gpt" --out "$tmp/bad"
expect_error "$py" $s/isoflop.py --gpt "$gpt" --out "$tmp/bad" --budgets 1e10
expect_error "$py" $s/isoflop.py --gpt "$gpt" --out "$tmp/bad" --sizes 2
expect_error "$py" $s/isoflop.py --gpt "$gpt" --out "$tmp/bad" --sweep 2:x@1e9
expect_error "$py" $s/isoflop.py --gpt "$gpt" --out "$tmp/bad" --beta2 1.5
expect_error "$py" $s/isoflop.py --gpt "$gpt" --out "$tmp/bad" --jobs 0
expect_error "$py" $s/isoflop.py --gpt "$gpt" --out "$tmp/bad" --min-tokens -1
expect_error "$py" $s/isoflop.py --gpt "$gpt" --out "$tmp/bad" --seeds 1337 --seeds-below 3e12
expect_error "$py" $s/isoflop.py --gpt "$gpt" --out "$tmp/bad" --seeds 1337,1338 --seeds-below 1e9
mkdir -p "$tmp/old_corpus"  # shards of the older layout: no corpus_version.txt beside sources.csv
touch "$tmp/old_corpus/train_000000.bin" "$tmp/old_corpus/val_000000.bin" "$tmp/old_corpus/sources.csv"
expect_error "$py" $s/isoflop.py --gpt "$gpt" --out "$tmp/bad" --data "$tmp/old_corpus"
expect_error $s/prepare_corpus.sh --gpt "$gpt" --out "$tmp/old_corpus"
expect_error "$py" scripts/plot_memory.py "$tmp/missing.json" --out "$tmp/bad.png"
expect_error "$py" $s/time_model.py sweep --gpt "$gpt" --out "$tmp/bad"
expect_error "$py" $s/time_model_measure.py --gpt "$gpt" --out "$tmp/bad" --only no_such_config
expect_error "$py" $s/wrap_sweep.py --gpt "$gpt" --out "$tmp/bad" --wraps 1,13
expect_error "$py" $s/activation_offload.py --gpt "$gpt" --out "$tmp/bad" --gpu-hardware no_such.json

echo "== plot_memory.py on a 2-rank trace"
"$gpt" tokenize --tokenizer byte --input data/tinyshakespeare/input.txt --out "$tmp/data" > /dev/null
OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 \
  mpiexec -n 2 --oversubscribe --bind-to none "$gpt" train --config d2 --tokenizer byte --seq-len 32 -B 2 -T 32 \
  --steps 2 --train "$tmp/data/train_*.bin" --sample-tokens 0 --quiet --trace "$tmp/trace.json" > "$tmp/trace.log" 2>&1 \
  || { tail -5 "$tmp/trace.log" >&2; echo "FAIL: 2-rank traced run" >&2; exit 1; }
"$py" scripts/plot_memory.py "$tmp/trace.json" --out "$tmp/memory.png"
[ -s "$tmp/memory.png" ] || { echo "FAIL: plot_memory.py wrote no PNG" >&2; exit 1; }

echo "== plot_metrics.py on a run's metrics"
"$gpt" train --config d2 --tokenizer byte --seq-len 32 -B 2 -T 32 --steps 4 --train "$tmp/data/train_*.bin" \
  --val "$tmp/data/val_*.bin" --val-every 2 --val-batches 1 --sample-tokens 0 --quiet --metrics "$tmp/metrics.jsonl" \
  > "$tmp/metrics.log" 2>&1 || { tail -5 "$tmp/metrics.log" >&2; echo "FAIL: run with --metrics" >&2; exit 1; }
"$py" scripts/plot_metrics.py "$tmp/metrics.jsonl" --out "$tmp/curves.png" > /dev/null
[ -s "$tmp/curves.png" ] || { echo "FAIL: plot_metrics.py wrote no PNG" >&2; exit 1; }
expect_error "$py" scripts/plot_metrics.py "$tmp/trace.log"
echo "all quick scaling scripts passed"
