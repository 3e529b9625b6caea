#!/usr/bin/python3
"""Training curves of one run from its `--metrics FILE.jsonl` (one JSON object per step).

Why: the per-step log scrolls by; this picture shows the whole run at once: the training loss and the
validation loss (on the steps that evaluated), the learning-rate schedule, and the MFU, on one shared step
axis. Lines that are not valid JSON, or objects without a step, are reported and skipped; a file with no
usable step is an error.

usage: /usr/bin/python3 scripts/plot_metrics.py RUN/metrics.jsonl [--out PNG]   (default: next to the file)
"""
import argparse
import json
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def read_metrics(path):
    rows, bad = [], 0
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            line = line.strip()
            if not line:
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError:
                bad += 1
                continue
            if isinstance(obj, dict) and isinstance(obj.get("step"), (int, float)):
                rows.append(obj)
            else:
                bad += 1
    if bad:
        print(f"plot_metrics: skipped {bad} line(s) of {path} that are not step objects", file=sys.stderr)
    return rows


def series(rows, key):
    pts = [(r["step"], r[key]) for r in rows if isinstance(r.get(key), (int, float))]
    return [p[0] for p in pts], [p[1] for p in pts]


def plot(rows, out, title):
    fig, axes = plt.subplots(3, 1, figsize=(8, 8), sharex=True)
    ax = axes[0]
    x, y = series(rows, "loss")
    ax.plot(x, y, lw=1, label="train loss")
    x, y = series(rows, "val_loss")
    if x:
        ax.plot(x, y, "o-", lw=1.5, ms=4, label="val loss")
        ax.annotate(f"{y[-1]:.3f}", (x[-1], y[-1]), textcoords="offset points", xytext=(4, 4))
    ax.set_ylabel("loss (nats per token)")
    ax.grid(alpha=0.3)
    ax.legend()
    ax.set_title(title)
    x, y = series(rows, "lr")
    axes[1].plot(x, y, lw=1, color="#55A868")
    axes[1].set_ylabel("learning rate")
    axes[1].grid(alpha=0.3)
    x, y = series(rows, "mfu")
    axes[2].plot(x, [100 * v for v in y], lw=1, color="#C44E52")
    axes[2].set_ylabel("MFU (%)")
    axes[2].set_xlabel("step")
    axes[2].grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(out, dpi=110)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("metrics", help="the --metrics JSONL file of a run")
    ap.add_argument("--out", help="PNG to write (default: curves.png beside the metrics file)")
    a = ap.parse_args()
    path = Path(a.metrics)
    if not path.is_file():
        sys.exit(f"plot_metrics: error: {path}: no such file")
    rows = read_metrics(path)
    if not rows:
        sys.exit(f"plot_metrics: error: {path}: no step objects (expected one JSON object per line with a 'step')")
    out = Path(a.out) if a.out else path.with_name("curves.png")
    plot(rows, out, str(path.parent.name))
    print(out)


if __name__ == "__main__":
    main()
