#!/usr/bin/python3
"""Throughput scaling of `gpt train` across N ranks: strong scaling (fixed global batch, per-rank batch
= global / N) and weak scaling (fixed per-rank batch), tokens/s with speedup and efficiency against N = 1,
and the overlap of communication with compute read from a trace of each run:
  exposed fraction = (time inside gather/reduce slot spans NOT covered by any compute span on the same
  rank) / step time, over the last complete step; the table shows the worst rank.
--device is passed through, so the same script runs unchanged on a multi-GPU machine (one rank per GPU).

Writes OUT/throughput.csv, OUT/throughput.png, OUT/results.md.
"""
import statistics
from pathlib import Path

import common as c
import trace_util as tu

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

NAME = "throughput"
FIELDS = ["config", "mode", "N", "B_per_rank", "T", "tokens_per_step", "median_step_ms", "tokens_per_s", "speedup",
          "efficiency", "trace_step_ms", "comm_ms", "exposed_ms", "exposed_fraction_max", "exposed_fraction_mean",
          "device", "shard", "status"]


def parse():
    p = c.base_parser(NAME, __doc__.splitlines()[0])
    p.add_argument("--configs", default=None, help="presets (default d2,d4; quick d2)")
    p.add_argument("--ranks", default=None, help="world sizes N (default 1,2,4; quick 1,2)")
    p.add_argument("--max-ranks", type=int, default=8, help="largest N allowed (default 8)")
    p.add_argument("--global-batch", type=int, default=8, help="strong scaling: global sequences per step (8)")
    p.add_argument("-B", type=int, default=4, help="weak scaling: sequences per rank per step (default 4)")
    p.add_argument("-T", type=int, default=64, help="sequence length, also --seq-len (default 64)")
    p.add_argument("--steps", type=int, default=None, help="steps per run; the median skips step 1 (default 6, quick 3)")
    p.add_argument("--shard", default="full", choices=["full", "grad_op", "none"], help="--shard (default full)")
    p.add_argument("--device", default="cpu", choices=["cpu", "cuda", "auto"], help="passed to gpt train")
    p.add_argument("--threads", type=int, default=1, help="OpenMP/OpenBLAS threads per rank (default 1)")
    p.add_argument("--modes", default="strong,weak", help="strong, weak or both (default strong,weak)")
    a = p.parse_args()
    a.configs = (a.configs or ("d2" if a.quick else "d2,d4")).split(",")
    for name in a.configs:
        if name not in ("d2", "d4", "d6", "d12", "d24", "d36", "d48"):
            raise c.UserError(f"--configs: unknown preset '{name}' (d2 d4 d6 d12 d24 d36 d48)")
    a.ranks = c.int_list(a.ranks or ("1,2" if a.quick else "1,2,4"), "--ranks", 1, c.MAX_RANKS)
    c.check_ranks(a.ranks, "--ranks", a.max_ranks, a.mpiexec)
    a.modes = c.choice_list(a.modes, "--modes", ["strong", "weak"])
    a.steps = a.steps if a.steps is not None else (3 if a.quick else 6)
    for flag, v, lo in (("--global-batch", a.global_batch, 1), ("-B", a.B, 1), ("-T", a.T, 1),
                        ("--steps", a.steps, 2), ("--threads", a.threads, 1)):
        if v < lo:
            raise c.UserError(f"{flag}: expected >= {lo}, got {v}")
    if "strong" in a.modes:
        for n in a.ranks:
            if a.global_batch % n:
                raise c.UserError(f"--global-batch {a.global_batch}: not divisible by world size {n} (strong scaling "
                                  "splits the global batch evenly over the ranks)")
    return a


def one_run(a, gpt, data, name, mode, n, tmp, log):
    b = a.global_batch // n if mode == "strong" else a.B
    row = {"config": name, "mode": mode, "N": n, "B_per_rank": b, "T": a.T, "tokens_per_step": b * a.T * n,
           "device": a.device, "shard": a.shard}
    stem = Path(tmp) / f"{name}_{mode}_{n}"
    argv = [gpt, "train", "--config", name, "--vocab", str(c.BYTE_VOCAB), "--seq-len", str(a.T), "--tokenizer", "byte",
            "--train", data, "-B", str(b), "-T", str(a.T), "--steps", str(a.steps), "--shard", a.shard,
            "--device", a.device, "--sample-tokens", "0", "--quiet", "--metrics", f"{stem}.jsonl",
            "--trace", f"{stem}.trace.json"]
    rc, _, out = c.run(c.launch(a, n, argv), c.mpi_env(a.threads), a.timeout, log)
    m = c.read_metrics(f"{stem}.jsonl")
    if rc != 0 or len(m) < 2:
        row["status"] = f"failed (rc {rc}): {c.last_error_line(out)}"
        return row
    ms = statistics.median(r["ms"] for r in m[1:])
    row.update({"median_step_ms": f"{ms:.2f}", "tokens_per_s": f"{row['tokens_per_step'] / (ms / 1e3):.1f}"})
    try:
        rep = tu.overlap_report(tu.load(f"{stem}.trace.json"))
        worst = max(rep, key=lambda r: r["exposed_fraction"])
        row.update({"trace_step_ms": f"{worst['step_ms']:.2f}", "comm_ms": f"{worst['comm_ms']:.2f}",
                    "exposed_ms": f"{worst['exposed_ms']:.2f}",
                    "exposed_fraction_max": f"{worst['exposed_fraction']:.4f}",
                    "exposed_fraction_mean": f"{statistics.mean(r['exposed_fraction'] for r in rep):.4f}"})
        row["status"] = "ok"
    except tu.TraceError as e:
        row["status"] = f"ok (no overlap: {e})"
    return row


def add_scaling(rows):
    for r in rows:
        base = [b for b in rows if b["config"] == r["config"] and b["mode"] == r["mode"] and b["N"] == 1
                and b.get("tokens_per_s")]
        if base and r.get("tokens_per_s"):
            s = float(r["tokens_per_s"]) / float(base[0]["tokens_per_s"])
            r["speedup"] = f"{s:.3f}"
            r["efficiency"] = f"{s / r['N']:.3f}"


def plot(a, rows, path):
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(13, 5.2))
    ok = [r for r in rows if r.get("tokens_per_s")]
    for i, name in enumerate(a.configs):
        for mode, ls, mk in (("strong", "-", "o"), ("weak", "--", "s")):
            rs = sorted([r for r in ok if r["config"] == name and r["mode"] == mode], key=lambda r: r["N"])
            if not rs:
                continue
            col = plt.get_cmap("tab10")(i)
            ax1.plot([r["N"] for r in rs], [float(r["tokens_per_s"]) for r in rs], mk + ls, color=col,
                     label=f"{name} {mode} (measured)")
            if rs[0]["N"] == 1:
                ax1.plot([r["N"] for r in rs], [float(rs[0]["tokens_per_s"]) * r["N"] for r in rs], ":", color=col,
                         alpha=0.5, label=f"{name} {mode} ideal (linear)")
            fr = [r for r in rs if r.get("exposed_fraction_max")]
            ax2.plot([r["N"] for r in fr], [float(r["exposed_fraction_max"]) for r in fr], mk + ls, color=col,
                     label=f"{name} {mode}")
    ax1.set_yscale("log")
    c.plain_log_ticks(ax1)
    ax1.set_ylabel("training throughput (tokens/s, all ranks; log scale)")
    ax1.set_title(f"tokens/s vs ranks (strong: {a.global_batch} sequences global; weak: B={a.B} per rank; T={a.T})",
                  fontsize=9)
    ax2.set_ylabel("exposed communication / step time (worst rank)")
    ax2.set_title("communication not hidden behind compute (last step of each run's trace)", fontsize=9)
    ax2.set_ylim(0, 1)
    for ax in (ax1, ax2):
        ax.set_xscale("log", base=2)
        ax.set_xticks(a.ranks)
        ax.set_xticklabels([str(n) for n in a.ranks])
        ax.set_xlabel("ranks N (log2 scale)")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    fig.suptitle(f"Throughput scaling: gpt train --shard {a.shard} --device {a.device}, {a.threads} thread(s) per rank")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def results_md(a, rows, out):
    L = ["# Throughput: strong and weak scaling, and exposed communication", "",
         f"Produced by `{c.command_line()}`.", "",
         f"`gpt train` on byte-level Tiny Shakespeare (V = 257, T = {a.T}), --shard {a.shard}, --device {a.device}, "
         f"{a.threads} thread(s) per rank, {a.steps} steps per run; tokens/s = tokens per step / median step time "
         "(step 1 skipped). Strong scaling keeps the global batch at "
         f"{a.global_batch} sequences (B per rank = {a.global_batch}/N); weak scaling keeps B = {a.B} per rank. "
         "Speedup and efficiency are against N = 1 of the same row family. Exposed fraction = time inside "
         "gather/reduce slot spans that no compute span (forward/backward/recompute, AdamW) covers on the same "
         "rank, divided by the step time, over the last complete step of the run's `--trace`; the worst rank "
         "is shown (mean over ranks in the CSV); 'traced step', 'comm' and 'exposed' ms come from that one traced "
         "step, ms/step is the median over the run.", "",
         "On CPU ranks of one machine, N ranks share its cores: once N exceeds the free cores, more ranks cannot "
         "add throughput, and MPI progress for non-blocking collectives happens mostly inside MPI calls, so "
         "communication is exposed more than on GPUs with a dedicated NCCL stream.", "",
         "![throughput](throughput.png)", ""]
    L.append(c.md_table(rows, [
        ("model", lambda r: r["config"]), ("mode", lambda r: r["mode"]), ("N", lambda r: r["N"]),
        ("B/rank", lambda r: r["B_per_rank"]), ("tokens/step", lambda r: r["tokens_per_step"]),
        ("ms/step", lambda r: c.na(r.get("median_step_ms"))), ("tokens/s", lambda r: c.na(r.get("tokens_per_s"))),
        ("speedup", lambda r: c.na(r.get("speedup"))), ("efficiency", lambda r: c.na(r.get("efficiency"))),
        ("traced step ms", lambda r: c.na(r.get("trace_step_ms"))), ("comm ms", lambda r: c.na(r.get("comm_ms"))),
        ("exposed ms", lambda r: c.na(r.get("exposed_ms"))),
        ("exposed / step", lambda r: c.na(r.get("exposed_fraction_max"))), ("status", lambda r: r["status"])]))
    (out / "results.md").write_text("\n".join(L) + "\n")


def main():
    a = parse()
    gpt = c.check_gpt(a.gpt)
    out = c.out_dir(a, NAME)
    data, _ = c.ensure_byte_data(gpt)
    tmp = c.scratch(NAME)
    log = Path(tmp) / "runs.log"
    rows = []
    for name in a.configs:
        for mode in a.modes:
            for n in a.ranks:
                rows.append(one_run(a, gpt, data, name, mode, n, tmp, log))
                add_scaling(rows)
                r = rows[-1]
                c.progress(f"{name} {mode} N={n}: {r.get('tokens_per_s', 'n/a')} tok/s, exposed "
                           f"{r.get('exposed_fraction_max', 'n/a')} ({r['status']})")
                c.write_csv(out / f"{NAME}.csv", rows, FIELDS)
    c.finish_scratch(tmp, rows)
    plot(a, rows, out / f"{NAME}.png")
    results_md(a, rows, out)
    c.progress(f"wrote {out}/{NAME}.csv, {NAME}.png, results.md")


if __name__ == "__main__":
    c.main_guard(main)
