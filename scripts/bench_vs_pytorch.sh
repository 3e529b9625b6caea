#!/usr/bin/env bash
# gpt against the PyTorch peer on the same model and batch, measured in the same run (interleaved, so a
# machine that drifts affects both): prints ms/step of each and the ratio torch / gpt.
#   scripts/bench_vs_pytorch.sh [CONFIG...]      (default: d6 d12; -B 4 -T 64; ROUNDS=2 STEPS=3)
# Needs build/gpt (scripts/build.sh gpt) and Debian's python3-torch at /usr/bin/python3.
set -euo pipefail
cd "$(dirname "$0")/.."
gpt="${GPT:-build/gpt}"
[ -x "$gpt" ] || { echo "error: $gpt not built (scripts/build.sh gpt)" >&2; exit 1; }
/usr/bin/python3 -c "import torch" 2>/dev/null || { echo "error: /usr/bin/python3 has no torch (apt-get install python3-torch)" >&2; exit 1; }
configs=("$@")
[ ${#configs[@]} -gt 0 ] || configs=(d6 d12)
B="${B:-4}" T="${T:-64}" steps="${STEPS:-3}" rounds="${ROUNDS:-2}"
for c in "${configs[@]}"; do
  ours=() theirs=()
  for r in $(seq "$rounds"); do
    ours+=("$("$gpt" bench --config "$c" -B "$B" -T "$T" --steps "$steps" --json | sed -n 's/.*"ms_per_step": \([0-9.e+-]*\).*/\1/p')")
    theirs+=("$(/usr/bin/python3 scripts/bench_pytorch.py --config "$c" -B "$B" -T "$T" --steps "$steps" --json | sed -n 's/.*"ms_per_step": \([0-9.e+-]*\).*/\1/p')")
  done
  /usr/bin/python3 - "$c" "${ours[*]}" "${theirs[*]}" <<'PY'
import statistics, sys
c, ours, theirs = sys.argv[1], [float(x) for x in sys.argv[2].split()], [float(x) for x in sys.argv[3].split()]
o, t = statistics.median(ours), statistics.median(theirs)
print(f"{c}: gpt {o:.1f} ms/step (rounds {', '.join(f'{x:.0f}' for x in ours)}) | "
      f"pytorch {t:.1f} ms/step (rounds {', '.join(f'{x:.0f}' for x in theirs)}) | pytorch/gpt = {t / o:.2f}x")
PY
done
