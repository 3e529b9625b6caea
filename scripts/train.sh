#!/usr/bin/env bash
# The quick start: installs what is missing, builds (CPU only, into build-cpu/, to skip nvcc), prepares
# Tiny Shakespeare, trains a small GPT in about three minutes on 2 CPU cores, prints generated text and
# draws the loss curves.
#   TOKENIZER=byte (default) | gpt2     STEPS=...     EXTRA="more flags"
#   RANKS=N   MPI ranks, one thread each (default: 2 when there are 2 cores and mpiexec, else 1); the global
#             batch stays 12 sequences, so N must divide 12, and the run is the same training at any N.
# Why ranks and not threads: at this size (4 layers, 128 channels, 12 x 64 tokens a step) one process
# with two OpenMP threads gains little over one thread, while two ranks each doing half the batch
# (--shard none: one all-reduce of 3 MB a step) use both cores.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install_deps.sh
export BUILD_DIR="${BUILD_DIR:-build-cpu}"
GPT_CUDA="${GPT_CUDA:-OFF}" scripts/build.sh gpt
gpt="$BUILD_DIR/gpt"
tok="${TOKENIZER:-byte}"
data="data/tinyshakespeare_$tok"
# The shards' tokenizer record (gpt_tokenizer.json) tells train which tokenizer and vocabulary to use;
# shards from before the record existed are tokenized again.
if [ ! -f "$data/train_000000.bin" ] || [ ! -f "$data/gpt_tokenizer.json" ]; then
  "$gpt" tokenize --tokenizer "$tok" --input data/tinyshakespeare/input.txt --out "$data"
fi

default_ranks=1
if [ "$(nproc)" -ge 2 ] && command -v mpiexec >/dev/null; then default_ranks=2; fi
ranks="${RANKS:-$default_ranks}"
if [ $((12 % ranks)) -ne 0 ]; then
  echo "error: RANKS=$ranks: expected a divisor of 12 (the global batch is 12 sequences)" >&2
  exit 1
fi
if [ "$tok" = byte ]; then
  # nanoGPT's baby Shakespeare shape (4 layers, 4 heads, 128 channels, 64-byte context, 12 sequences a step)
  model=(--n-layer 4 --n-head 4 --d-model 128 --seq-len 64 -T 64 --lr 4e-3 --warmup 100)
  T=64 steps="${STEPS:-3000}" val_batches=32  # the byte validation split holds 145 batches of 12 x 64
else
  model=(--config d4 --seq-len 128 -T 128 --lr 1e-3 --warmup 20)
  T=128 steps="${STEPS:-400}" val_batches=16  # the GPT-2 validation split holds 22 batches of 12 x 128
fi
batch=(-B $((12 / ranks)) --total-batch $((12 * T)))
launch=()
if [ "$ranks" -gt 1 ]; then
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
  launch=(mpiexec -n "$ranks" --oversubscribe)
  batch+=(--shard none)
fi
run="runs/shakespeare_$tok"
start=$(date +%s)
"${launch[@]}" "$gpt" train "${model[@]}" "${batch[@]}" --steps "$steps" \
  --train "$data/train_*.bin" --val "$data/val_*.bin" --val-every 500 --val-batches "$val_batches" \
  --sample-every 1000 --sample-tokens 200 --out "$run" --metrics "$run/metrics.jsonl" ${EXTRA:-}
echo "trained in $(( $(date +%s) - start )) s on $ranks rank(s)"
echo
echo "samples from the trained model ($run/model.bin):"
# sample has no data to read a record from: it takes the tokenizer from the model's vocabulary (257: bytes)
"$gpt" sample --model "$run/model.bin" --prompt "ROMEO:" --tokens 300 --temperature 0.8 --top-k 40
echo
py=/usr/bin/python3  # Debian's, with the python3-matplotlib that install_deps.sh installs
[ -x "$py" ] || py=python3
if "$py" -c "import matplotlib" 2>/dev/null; then
  echo "loss, lr and MFU curves: $("$py" scripts/plot_metrics.py "$run/metrics.jsonl" --out "$run/curves.png")"
else
  echo "(no matplotlib for $py: the loss curves are not drawn; scripts/plot_metrics.py $run/metrics.jsonl draws them)"
fi
