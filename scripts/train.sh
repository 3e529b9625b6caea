#!/usr/bin/env bash
# The quick start: installs what is missing, builds (CPU only, into build-cpu/, to skip nvcc), prepares
# Tiny Shakespeare, trains a small GPT on 2 CPU cores in a few minutes, and prints generated text.
#   TOKENIZER=byte (default) | gpt2     STEPS=...   RANKS=N (train on N MPI ranks)   EXTRA="more flags"
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install_deps.sh
export BUILD_DIR="${BUILD_DIR:-build-cpu}"
GPT_CUDA="${GPT_CUDA:-OFF}" scripts/build.sh gpt
gpt="$BUILD_DIR/gpt"
tok="${TOKENIZER:-byte}"
data="data/tinyshakespeare_$tok"
if [ ! -f "$data/train_000000.bin" ]; then
  "$gpt" tokenize --tokenizer "$tok" --input data/tinyshakespeare/input.txt --out "$data"
fi
if [ "$tok" = byte ]; then
  model=(--config d4 --seq-len 128 -T 128 -B 12 --lr 2e-3 --warmup 20)
  steps="${STEPS:-500}"
else
  model=(--config d4 --seq-len 128 -T 128 -B 8 --lr 1e-3 --warmup 20)
  steps="${STEPS:-400}"
fi
launch=()
if [ "${RANKS:-1}" -gt 1 ]; then
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
  launch=(mpiexec -n "$RANKS" --oversubscribe)
fi
run="runs/shakespeare_$tok"
"${launch[@]}" "$gpt" train "${model[@]}" --tokenizer "$tok" --steps "$steps" \
  --train "$data/train_*.bin" --val "$data/val_*.bin" --val-every 100 --val-batches 16 \
  --sample-every 200 --sample-tokens 200 --out "$run" --metrics "$run/metrics.jsonl" ${EXTRA:-}
echo
echo "samples from the trained model ($run/model.bin):"
"$gpt" sample --model "$run/model.bin" --tokenizer "$tok" --prompt "ROMEO:" --tokens 300 --temperature 0.8 --top-k 40
