#!/usr/bin/python3
"""Memory levers: step time against peak memory for each recompute mode (none, full, every:2, selective)
and offload mode (none, optimizer, params), timed with `gpt bench --json` on one process; each lever's
time and memory ratio against the baseline (recompute none, offload none). Beside each, the
`gpt memplan` prediction of the device peak when the planner exists.

Why: recompute trades compute for activation memory and offload trades copies and host AdamW for device
memory; the price of each is a ratio worth knowing before picking one.

Writes OUT/levers.csv, OUT/levers.png, OUT/results.md.
"""
import json
from pathlib import Path

import common as c

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

NAME = "levers"
FIELDS = ["config", "B", "T", "V", "lever", "recompute", "offload", "ms_per_step", "tokens_per_s", "mfu",
          "peak_device_mib", "peak_host_mib", "memplan_device_peak_mib", "memplan_host_peak_mib", "time_ratio",
          "device_memory_ratio", "status"]
LEVERS = [("baseline", "none", "none"), ("recompute full", "full", "none"), ("recompute every:2", "every:2", "none"),
          ("recompute selective", "selective", "none"), ("offload optimizer", "none", "optimizer"),
          ("offload params", "none", "params"), ("recompute full + offload params", "full", "params")]


def parse():
    p = c.base_parser(NAME, __doc__.splitlines()[0])
    p.add_argument("--configs", default=None, help="presets (default d6,d12; quick d2)")
    p.add_argument("-B", type=int, default=4, help="micro-batch (default 4)")
    p.add_argument("-T", type=int, default=64, help="sequence length (default 64)")
    p.add_argument("--vocab", type=int, default=None, help="vocabulary (default 50257, GPT-2; quick 257, bytes)")
    p.add_argument("--seq-len", type=int, default=None, help="max sequence length (default: -T)")
    p.add_argument("--steps", type=int, default=None, help="timed steps per lever after 1 warm-up (default 3, quick 2)")
    p.add_argument("--threads", type=int, default=1, help="OpenMP/OpenBLAS threads (default 1: steadier on a shared machine)")
    p.add_argument("--device", default="cpu", choices=["cpu", "cuda", "auto"], help="passed to gpt bench")
    a = p.parse_args()
    a.configs = (a.configs or ("d2" if a.quick else "d6,d12")).split(",")
    for name in a.configs:
        if name not in ("d2", "d4", "d6", "d12", "d24", "d36", "d48"):
            raise c.UserError(f"--configs: unknown preset '{name}' (d2 d4 d6 d12 d24 d36 d48)")
    a.steps = a.steps if a.steps is not None else (2 if a.quick else 3)
    a.vocab = a.vocab or (257 if a.quick else 50257)
    a.seq_len = a.seq_len or a.T
    for flag, v in (("-B", a.B), ("-T", a.T), ("--steps", a.steps), ("--threads", a.threads), ("--vocab", a.vocab)):
        if v < 1:
            raise c.UserError(f"{flag}: expected >= 1, got {v}")
    if a.T > a.seq_len:
        raise c.UserError(f"-T {a.T}: longer than --seq-len {a.seq_len}")
    return a


def bench(a, gpt, name, rec, off, log):
    argv = [gpt, "bench", "--config", name, "--vocab", str(a.vocab), "--seq-len", str(a.seq_len), "-B", str(a.B),
            "-T", str(a.T), "--steps", str(a.steps), "--recompute", rec, "--offload", off, "--device", a.device,
            "--json"]
    rc, _, out = c.run(argv, c.mpi_env(a.threads), a.timeout, log)
    lines = [l for l in out.splitlines() if l.startswith("{")]
    if rc != 0 or not lines:
        return None, f"failed (rc {rc}): {c.last_error_line(out)}"
    return json.loads(lines[-1]), "ok"


def sweep(a, gpt, out):
    tmp = c.scratch(NAME)
    log = Path(tmp) / "runs.log"
    plan_ok = c.memplan_available(gpt)
    rows = []
    for name in a.configs:
        base = None
        for lever, rec, off in LEVERS:
            row = {"config": name, "B": a.B, "T": a.T, "V": a.vocab, "lever": lever, "recompute": rec, "offload": off}
            r, status = bench(a, gpt, name, rec, off, log)
            row["status"] = status
            if r:
                row.update({k: r.get(k) for k in ("ms_per_step", "tokens_per_s", "mfu", "peak_device_mib", "peak_host_mib")})
                if lever == "baseline":
                    base = row
                if base:
                    row["time_ratio"] = f"{r['ms_per_step'] / base['ms_per_step']:.3f}"
                    row["device_memory_ratio"] = f"{r['peak_device_mib'] / base['peak_device_mib']:.3f}"
            if plan_ok:
                dev = "cuda" if a.device == "cuda" else "cpu"
                p = c.memplan(gpt, ["--config", name, "--vocab", str(a.vocab), "--seq-len", str(a.seq_len), "-B",
                                    str(a.B), "-T", str(a.T), "--world", "1", "--recompute", rec, "--offload", off,
                                    "--device", dev])
                if p:
                    row["memplan_device_peak_mib"] = f"{p['device_peak_bytes'] / 2**20:.2f}"
                    row["memplan_host_peak_mib"] = f"{p['host_peak_bytes'] / 2**20:.2f}"
            rows.append(row)
            c.progress(f"{name} {lever}: {row.get('ms_per_step', 'n/a')} ms/step, device peak "
                       f"{row.get('peak_device_mib', 'n/a')} MiB, x{row.get('time_ratio', 'n/a')} time ({status})")
            c.write_csv(out / f"{NAME}.csv", rows, FIELDS)
    c.finish_scratch(tmp, rows)
    return rows


SHORT = {"baseline": "base", "recompute full": "R full", "recompute every:2": "R every:2",
         "recompute selective": "R sel", "offload optimizer": "O opt", "offload params": "O params",
         "recompute full + offload params": "R full+O params"}


def plot(a, rows, path):
    fig, axes = plt.subplots(1, len(a.configs), figsize=(7.5 * len(a.configs), 5.2), squeeze=False)
    for ax, name in zip(axes[0], a.configs):
        rs = [r for r in rows if r["config"] == name and r["status"] == "ok"]
        for i, r in enumerate(rs):
            col = plt.get_cmap("tab10")(i)
            ax.scatter(r["peak_device_mib"], r["ms_per_step"], s=60, color=col, zorder=3,
                       label=f"{r['lever']}: x{r.get('time_ratio', '?')} time, x{r.get('device_memory_ratio', '?')} memory")
            ax.annotate(SHORT.get(r["lever"], r["lever"]), (r["peak_device_mib"], r["ms_per_step"]),
                        textcoords="offset points", xytext=(6, 5 if i % 2 == 0 else -11), fontsize=8, color=col)
        ax.set_xlabel("peak device memory (MiB; on CPU the 'device' ledger domain)")
        ax.set_ylabel("step time (ms, median)")
        ax.set_title(f"{name}: B={a.B}, T={a.T}, V={a.vocab}, {a.device}", fontsize=10)
        ax.grid(alpha=0.3)
        ax.margins(x=0.2, y=0.15)
        ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.14), ncol=2)
    fig.suptitle("Memory levers: step time vs peak memory "
                 "(one process; ratios against recompute none + offload none)", fontsize=11)
    fig.tight_layout()
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)


def results_md(a, rows, out):
    L = ["# Memory levers: step time vs peak memory", "", f"Produced by `{c.command_line()}`.", "",
         f"`gpt bench --json` (1 warm-up step + {a.steps} timed steps, median) on one process with {a.threads} "
         f"threads, random tokens, B = {a.B}, T = {a.T}, V = {a.vocab}, --device {a.device}. Ratios are against "
         "the baseline (recompute none, offload none) of the same model. On CPU 'device' and 'host' are separate "
         "ledger domains in the same RAM, so offload shows up as device bytes moving to the host column.", "",
         "![levers](levers.png)", ""]
    L.append(c.md_table(rows, [
        ("model", lambda r: r["config"]), ("lever", lambda r: r["lever"]),
        ("ms/step", lambda r: c.na(r.get("ms_per_step"), "{:.1f}")), ("time ratio", lambda r: c.na(r.get("time_ratio"))),
        ("device peak MiB", lambda r: c.na(r.get("peak_device_mib"), "{:.1f}")),
        ("memory ratio", lambda r: c.na(r.get("device_memory_ratio"))),
        ("host peak MiB", lambda r: c.na(r.get("peak_host_mib"), "{:.1f}")),
        ("memplan device MiB", lambda r: c.na(r.get("memplan_device_peak_mib"))),
        ("memplan host MiB", lambda r: c.na(r.get("memplan_host_peak_mib"))),
        ("tokens/s", lambda r: c.na(r.get("tokens_per_s"), "{:.0f}")), ("status", lambda r: r["status"])]))
    (out / "results.md").write_text("\n".join(L) + "\n")


def main():
    a = parse()
    gpt = c.check_gpt(a.gpt)
    out = c.out_dir(a, NAME)
    rows = sweep(a, gpt, out)
    plot(a, rows, out / f"{NAME}.png")
    results_md(a, rows, out)
    c.progress(f"wrote {out}/{NAME}.csv, {NAME}.png, results.md")


if __name__ == "__main__":
    c.main_guard(main)
