#!/usr/bin/python3
"""Communication volume per step per rank: measured `max_rank_bytes_sent` of real `gpt train` runs on N CPU
ranks for --shard full, grad_op and none, against the ZeRO/FSDP volumes with Psi in bytes (fp32, 4 bytes
per element; each unit padded to a multiple of N):
  full     3 Psi (N-1)/N            (paper: two all-gathers + one reduce-scatter)
           (3 Psi - psi_embed)(N-1)/N  (ours: the root unit embed is gathered once per step, not twice)
  grad_op  2 Psi (N-1)/N            (one all-gather + one reduce-scatter)
  none     2 Psi (N-1)/N            (DDP ring all-reduce; no padding, per-unit integer division)
Psi per unit comes from the model shape computed here: embed = Vp*C + maxT*C, block = 12C^2 + 13C,
head = 2C, Vp = V rounded up to 128.

Writes OUT/comm_volume.csv, OUT/comm_volume.png, OUT/results.md.
"""
from pathlib import Path

import common as c

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

NAME = "comm_volume"
FIELDS = ["config", "L", "C", "psi", "psi_embed", "N", "shard", "psi_padded", "measured_bytes",
          "paper_formula_bytes", "ours_formula_bytes", "measured_over_paper", "measured_minus_ours", "status"]
STYLE = {"full": ("#C44E52", "o"), "grad_op": ("#4C72B0", "s"), "none": ("#55A868", "^")}


def parse():
    p = c.base_parser(NAME, __doc__.splitlines()[0])
    p.add_argument("--configs", default=None, help="depth-family models (default d2,d4,d6; quick d2)")
    p.add_argument("--ranks", default=None, help="world sizes N (default 1,2,3,4,8; quick 1,2,3,4)")
    p.add_argument("--max-ranks", type=int, default=8, help="largest N allowed (default 8)")
    p.add_argument("--strategies", default="full,grad_op,none", help="--shard values (full,grad_op,none)")
    p.add_argument("-B", type=int, default=2, help="per-rank micro-batch (default 2)")
    p.add_argument("-T", type=int, default=32, help="sequence length, also --seq-len (default 32)")
    p.add_argument("--steps", type=int, default=None, help="steps per run; the last one is read (default 2, quick 1)")
    a = p.parse_args()
    a.configs = (a.configs or ("d2" if a.quick else "d2,d4,d6")).split(",")
    for name in a.configs:
        c.family_shape(name)
    a.ranks = c.int_list(a.ranks or ("1,2,3,4" if a.quick else "1,2,3,4,8"), "--ranks", 1, c.MAX_RANKS)
    c.check_ranks(a.ranks, "--ranks", a.max_ranks, a.mpiexec)
    a.strategies = c.choice_list(a.strategies, "--strategies", ["full", "grad_op", "none"])
    a.steps = a.steps if a.steps is not None else (1 if a.quick else 2)
    for flag, v in (("-B", a.B), ("-T", a.T), ("--steps", a.steps)):
        if v < 1:
            raise c.UserError(f"{flag}: expected >= 1, got {v}")
    return a


def formulas(units, n, shard):
    """(paper, ours) bytes per rank per step."""
    if n == 1:
        return 0, 0
    padded = [c.pad_to(u, n) for u in units]
    psi_n = sum(padded)
    if shard == "full":
        return 3 * psi_n * 4 * (n - 1) // n, (3 * psi_n - padded[0]) * 4 * (n - 1) // n
    if shard == "grad_op":
        v = 2 * psi_n * 4 * (n - 1) // n
        return v, v
    return 2 * sum(units) * 4 * (n - 1) // n, sum(2 * u * 4 * (n - 1) // n for u in units)


def sweep(a, gpt, out):
    data, _ = c.ensure_byte_data(gpt)
    tmp = c.scratch(NAME)
    log = Path(tmp) / "runs.log"
    rows = []
    for name in a.configs:
        L, _, C = c.family_shape(name)
        units = c.unit_numels(L, C, c.BYTE_VOCAB, a.T)
        for n in a.ranks:
            for shard in a.strategies:
                paper, ours = formulas(units, n, shard)
                row = {"config": name, "L": L, "C": C, "psi": sum(units), "psi_embed": units[0], "N": n,
                       "shard": shard, "psi_padded": sum(c.pad_to(u, n) for u in units) if shard != "none" else sum(units),
                       "paper_formula_bytes": paper, "ours_formula_bytes": ours}
                metrics = Path(tmp) / f"{name}_{n}_{shard}.jsonl"
                argv = [gpt, "train"] + c.model_flags(name, c.BYTE_VOCAB, a.T) + [
                    "--shard", shard, "--tokenizer", "byte", "--train", data, "-B", str(a.B), "-T", str(a.T),
                    "--steps", str(a.steps), "--sample-tokens", "0", "--quiet", "--metrics", str(metrics)]
                rc, _, text = c.run(c.launch(a, n, argv), c.mpi_env(1), a.timeout, log)
                m = c.read_metrics(metrics)
                if rc != 0 or not m:
                    row["status"] = f"failed (rc {rc}): {c.last_error_line(text)}"
                else:
                    meas = int(m[-1]["max_rank_bytes_sent"])
                    row.update({"measured_bytes": meas, "measured_minus_ours": meas - ours, "status": "ok",
                                "measured_over_paper": f"{meas / paper:.6f}" if paper else ""})
                rows.append(row)
                c.progress(f"{name} N={n} {shard}: measured {row.get('measured_bytes', 'n/a')} B, paper {paper} B, "
                           f"ours {ours} B ({row['status']})")
                c.write_csv(out / f"{NAME}.csv", rows, FIELDS)
    c.finish_scratch(tmp, rows)
    return rows


def plot(a, rows, path):
    ok = [r for r in rows if r["status"] == "ok"]
    big = a.configs[-1]
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(13, 5.2))
    ns = sorted(a.ranks)
    for shard in a.strategies:
        col, mk = STYLE[shard]
        rs = sorted([r for r in ok if r["config"] == big and r["shard"] == shard], key=lambda r: r["N"])
        allr = sorted([r for r in rows if r["config"] == big and r["shard"] == shard], key=lambda r: r["N"])
        ax1.plot([r["N"] for r in allr], [r["paper_formula_bytes"] / 2**20 for r in allr], "-", color=col, alpha=0.5,
                 label=f"{shard}: paper {'3' if shard == 'full' else '2'}Ψ(N-1)/N")
        if shard == "full":
            ax1.plot([r["N"] for r in allr], [r["ours_formula_bytes"] / 2**20 for r in allr], ":", color=col,
                     label="full: ours (3Ψ-ψ_embed)(N-1)/N")
        ax1.plot([r["N"] for r in rs], [r["measured_bytes"] / 2**20 for r in rs], mk, color=col, ms=8, mfc="none",
                 mew=1.6, label=f"{shard}: measured")
        for name in a.configs:
            rs = sorted([r for r in ok if r["config"] == name and r["shard"] == shard], key=lambda r: r["N"])
            ax2.plot([r["N"] for r in rs], [r["measured_bytes"] / (4 * r["psi"]) for r in rs], mk, color=col, ms=7,
                     mfc="none", alpha=0.8, label=f"{shard} measured" if name == big else None)
    grid = [1 + i * (max(ns) - 1) / 200 for i in range(201)]
    ax2.plot(grid, [3 * (n - 1) / n for n in grid], "-", color=STYLE["full"][0], alpha=0.5, label="3(N-1)/N")
    ax2.plot(grid, [2 * (n - 1) / n for n in grid], "-", color=STYLE["grad_op"][0], alpha=0.5, label="2(N-1)/N")
    psi_big = [r for r in rows if r["config"] == big][0]["psi"]
    ax1.set_title(f"{big}: bytes sent per step per rank (Ψ = {psi_big:,} params, fp32)", fontsize=10)
    ax1.set_ylabel("sent per step per rank (MiB)")
    ax2.set_title(f"all models ({', '.join(a.configs)}): sent / (4 bytes x Ψ)", fontsize=10)
    ax2.set_ylabel("sent per step per rank ÷ (4 bytes × Ψ)")
    for ax in (ax1, ax2):
        ax.set_xlabel("ranks N")
        ax.set_xticks(ns)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle(f"Communication volume per training step (V=257, B={a.B}, T={a.T}, CPU ranks, MPI)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def results_md(a, rows, out):
    ok = [r for r in rows if r["status"] == "ok"]
    exact = sum(1 for r in ok if r["measured_minus_ours"] == 0)
    devs = {}
    for r in ok:
        if r.get("measured_over_paper"):
            devs.setdefault(r["shard"], []).append(abs(float(r["measured_over_paper"]) - 1))
    dev_text = "; ".join(f"{k} {max(v):.4f}" for k, v in devs.items()) or "n/a"
    L = ["# Communication volume per step: measured vs 2Ψ / 3Ψ", "", f"Produced by `{c.command_line()}`.", "",
         f"Models: depth family dL (L layers, L heads, C = 64L), V = 257 (Vp = 384), seq-len = T = {a.T}, "
         f"B = {a.B}, {a.steps} step(s) per run; the last step's `max_rank_bytes_sent` from `--metrics` "
         "(bytes one rank sends in the step, ring-algorithm accounting; no evaluation in the step). "
         "Ψ counts fp32 elements x 4 bytes, each unit padded to a multiple of N for full/grad_op.", "",
         "- paper: full 3Ψ(N-1)/N; grad_op and none 2Ψ(N-1)/N.",
         "- ours: full (3Ψ - ψ_embed)(N-1)/N, because the root unit embed (wte + wpe, also the tied LM head) "
         "stays gathered from the start of forward until its gradient is reduced, so it is all-gathered once per "
         "step instead of twice; grad_op as the paper; none = sum over units of the ring all-reduce "
         "2ψ_u·4·(N-1)/N with integer division (no padding in DDP).",
         f"- measured == ours, byte for byte: {exact}/{len(ok)} runs",
         f"- max |measured / paper - 1| per strategy (N > 1): {dev_text}", "",
         "![communication volume](comm_volume.png)", ""]
    L.append(c.md_table(rows, [
        ("model", lambda r: r["config"]), ("Ψ", lambda r: r["psi"]), ("ψ_embed", lambda r: r["psi_embed"]),
        ("N", lambda r: r["N"]), ("shard", lambda r: r["shard"]),
        ("measured B", lambda r: c.na(r.get("measured_bytes"))), ("paper B", lambda r: r["paper_formula_bytes"]),
        ("ours B", lambda r: r["ours_formula_bytes"]), ("measured/paper", lambda r: c.na(r.get("measured_over_paper"))),
        ("measured-ours", lambda r: c.na(r.get("measured_minus_ours"))), ("status", lambda r: r["status"])]))
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
