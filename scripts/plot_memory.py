#!/usr/bin/python3
"""Memory timeline of one training step from a `gpt train --trace` file.

Why: the ledger's totals say how much memory a step needs; this picture says *when*: how the gathered
parameter slots and gradient slots fill and drain as FSDP gathers unit i+1 while computing unit i, and
where the all-gathers and reduce-scatters sit on the time axis. One panel per rank (or --rank R), the
last complete step in the trace (from the first next_batch after the previous AdamW to this AdamW's end):
  - stacked area: the memory counters "gathered params in use" and "gradient slots in use" (MiB);
  - dashed line: "comm bytes in flight" (bytes being moved by started collectives; they live inside the
    slots above, so the line is not stacked on them);
  - thin bars below: each gather slot's all-gather and each reduce slot's reduce-scatter (start -> finish),
    with the compute spans in grey and the offload copies (host <-> device) in green for reference.

usage: /usr/bin/python3 scripts/plot_memory.py TRACE.json --out PNG [--rank R]
"""
import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent / "scaling"))
import trace_util as tu  # noqa: E402

import matplotlib  # noqa: E402

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

MIB = 1048576.0
COLORS = {"gathered params in use": "#4C72B0", "gradient slots in use": "#DD8452"}


def die(msg):
    print(f"plot_memory.py: error: {msg}", file=sys.stderr)
    sys.exit(2)


def step_series(points, t0, t1):
    """A counter as a step function on [t0, t1] (ms from t0): the value before t0 carries in."""
    before = [v for ts, v in points if ts <= t0]
    xs, ys = [0.0], [before[-1] if before else 0.0]
    for ts, v in points:
        if t0 < ts <= t1:
            xs.append((ts - t0) / 1e3)
            ys.append(v)
    xs.append((t1 - t0) / 1e3)
    ys.append(ys[-1])
    return xs, ys


def resample(series, grid):
    """Values of a post-step function (xs, ys) at each grid point."""
    xs, ys = series
    out, j = [], 0
    for g in grid:
        while j + 1 < len(xs) and xs[j + 1] <= g:
            j += 1
        out.append(ys[j])
    return out


def draw_memory(ax, cnt, t0, t1):
    series = {n: step_series(cnt.get(n, []), t0, t1) for n in tu.MEMORY_COUNTERS}
    grid = sorted({x for s in series.values() for x in s[0]})
    base = [0.0] * len(grid)
    for name in tu.MEMORY_COUNTERS:
        vals = [v / MIB for v in resample(series[name], grid)]
        top = [b + v for b, v in zip(base, vals)]
        ax.fill_between(grid, base, top, step="post", alpha=0.75, color=COLORS[name], label=name, linewidth=0)
        base = top
    if tu.FLIGHT_COUNTER in cnt:
        xs, ys = step_series(cnt[tu.FLIGHT_COUNTER], t0, t1)
        ax.step(xs, [y / MIB for y in ys], where="post", color="black", linestyle="--", linewidth=1.0,
                label="comm bytes in flight (inside the slots)")
    ax.set_ylabel("memory (MiB)")
    ax.set_ylim(bottom=0, top=max(1e-3, max(base + [0]) * 1.25))
    ax.grid(alpha=0.3)
    ax.legend(loc="upper right", fontsize=8)


def draw_bars(ax, sp, t0, t1):
    rows = [(tid, "compute") for tid in [tu.COMPUTE] if tid in sp]
    rows += [(tid, "copies (offload)") for tid in [tu.COPIES] if tid in sp]
    rows += [(tid, f"gather slot {tid - tu.GATHER0}") for tid in sorted(sp) if tu.GATHER0 <= tid < tu.REDUCE0]
    rows += [(tid, f"reduce slot {tid - tu.REDUCE0}") for tid in sorted(sp) if tid >= tu.REDUCE0]
    colors = {"compute": "#999999", "copies": "#55A868", "gather": "#4C72B0", "reduce": "#DD8452"}
    for i, (tid, label) in enumerate(rows):
        spans = [s for s in sp[tid] if s[3] > t0 and s[2] < t1 and (tid != tu.COMPUTE or s[1] == "compute")]
        bars = [((max(s[2], t0) - t0) / 1e3, (min(s[3], t1) - max(s[2], t0)) / 1e3) for s in spans]
        ax.broken_barh(bars, (i - 0.35, 0.7), color=colors[label.split()[0]], linewidth=0)
    ax.set_yticks(range(len(rows)))
    ax.set_yticklabels([r[1] for r in rows], fontsize=7)
    ax.set_ylim(-0.6, len(rows) - 0.4)
    ax.invert_yaxis()
    ax.set_xlim(0, (t1 - t0) / 1e3)
    ax.grid(axis="x", alpha=0.3)


def main():
    p = argparse.ArgumentParser(prog="plot_memory.py", description=__doc__.splitlines()[0])
    p.add_argument("trace", help="trace JSON written by gpt train --trace")
    p.add_argument("--out", default=None, help="PNG to write (default: TRACE with .png)")
    p.add_argument("--rank", type=int, default=None, help="plot only this rank (default: every rank)")
    a = p.parse_args()
    out = Path(a.out) if a.out else Path(a.trace).with_suffix(".png")
    if out.suffix.lower() != ".png":
        die(f"--out {out}: expected a .png file name")
    try:
        events = tu.load(a.trace)
        all_ranks = tu.ranks(events)
        if not all_ranks:
            die(f"{a.trace}: no spans or counters in the trace")
        if a.rank is not None and a.rank not in all_ranks:
            die(f"--rank {a.rank}: the trace holds ranks {all_ranks[0]}..{all_ranks[-1]}")
        chosen = [a.rank] if a.rank is not None else all_ranks
        panels = []
        for r in chosen:
            sp, cnt = tu.spans(events, r), tu.counters(events, r)
            if not any(n in cnt for n in tu.MEMORY_COUNTERS):
                die(f"{a.trace}: rank {r} has no memory counters (was it written by gpt train --trace?)")
            (t0, t1), k = tu.last_step_window(sp, r)
            panels.append((r, sp, cnt, t0, t1, k))
    except tu.TraceError as e:
        die(str(e))

    nb = max(2, len([t for t in panels[0][1] if t >= tu.GATHER0]) + 1)
    fig = plt.figure(figsize=(11, 1.2 + len(panels) * (2.6 + 0.18 * nb)))
    outer = fig.add_gridspec(len(panels), 1, hspace=0.32)
    for i, (r, sp, cnt, t0, t1, k) in enumerate(panels):
        inner = outer[i].subgridspec(2, 1, height_ratios=[3.0, 0.25 * nb], hspace=0.08)
        ax = fig.add_subplot(inner[0])
        draw_memory(ax, cnt, t0, t1)
        ax.set_title(f"rank {r}: step {k} (last complete step in the trace), {(t1 - t0) / 1e3:.1f} ms", fontsize=10)
        ax.tick_params(labelbottom=False)
        bx = fig.add_subplot(inner[1], sharex=ax)
        draw_bars(bx, sp, t0, t1)
        bx.set_xlabel("time since the step's first batch (ms)")
    fig.suptitle(f"Gathered-parameter and gradient-slot memory over one step: {Path(a.trace).name}", fontsize=11)
    try:
        fig.savefig(out, dpi=110, bbox_inches="tight")
    except OSError as e:
        die(f"--out {out}: cannot write ({e.strerror})")
    print(f"wrote {out} ({len(panels)} rank{'s' if len(panels) > 1 else ''}, step {panels[0][5]})")


if __name__ == "__main__":
    main()
