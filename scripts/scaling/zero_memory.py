#!/usr/bin/python3
"""ZeRO memory sweep: measured per-rank model-state bytes and device peak of real `gpt train` runs on N CPU
ranks, for depth-family models d2..d12 (L layers, L heads, C = 64L; byte vocabulary V = 257, short T),
under each sharding strategy, recompute mode and offload mode, beside the `gpt memplan` prediction and
the closed form 16 * sum_u ceil(psi_u / G) (fp32 param + grad + Adam m + v per owned parameter).
ZeRO's Table 1 (7.5B parameters at N = 4, 16, 64, 1024) is reported from `gpt memplan --zero-table` next
to the paper's published values.

Why: the sharded model states must fall as 1/N (ZeRO-3 / FULL_SHARD and SHARD_GRAD_OP) or stay flat (DDP),
and the planner must agree with what the ledger measures; this shows both on real runs.

Writes OUT/zero_memory.csv, OUT/zero_table.csv, OUT/zero_memory.png, OUT/results.md.
"""
from pathlib import Path

import common as c

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

NAME = "zero_memory"
FIELDS = ["config", "L", "C", "psi", "N", "shard", "group", "recompute", "offload", "B", "T",
          "measured_model_state_bytes", "memplan_model_state_bytes", "formula_model_state_bytes",
          "measured_device_peak_bytes", "memplan_device_peak_bytes", "memplan_host_peak_bytes",
          "peak_rel_err", "status", "seconds"]
# ZeRO (arXiv 1910.02054) Table 1 as published: GB per device for Psi = 7.5B, K = 12.
ZERO_PAPER = {4: (120, 52.5, 41.3, 30), 16: (120, 35.6, 21.6, 7.5), 64: (120, 31.4, 16.6, 1.88),
              1024: (120, 30.1, 15.1, 0.12)}


def parse():
    p = c.base_parser(NAME, __doc__.splitlines()[0])
    p.add_argument("--configs", default=None, help="depth-family models (default d2,d4,d6,d8,d10,d12; quick d2)")
    p.add_argument("--ranks", default=None, help="world sizes N (default 1,2,4,8; quick 1,2)")
    p.add_argument("--max-ranks", type=int, default=8, help="largest N allowed (default 8)")
    p.add_argument("--strategies", default="full,grad_op,none", help="--shard values (full,grad_op,none,hybrid)")
    p.add_argument("--shard-group", type=int, default=0, help="G for hybrid (every N must be a multiple)")
    p.add_argument("--recompute", default="none,full", help="recompute modes (default none,full)")
    p.add_argument("--offload", default="none,optimizer", help="offload modes (default none,optimizer)")
    p.add_argument("-B", type=int, default=2, help="per-rank micro-batch (default 2)")
    p.add_argument("-T", type=int, default=32, help="sequence length, also --seq-len (default 32)")
    p.add_argument("--steps", type=int, default=1, help="training steps per run (default 1)")
    p.add_argument("--replot", action="store_true",
                   help="run nothing: redraw the PNG and results.md from OUT/zero_memory.csv")
    p.add_argument("--mem-fraction", type=float, default=0.6,
                   help="skip a run whose predicted RAM (all ranks) exceeds this fraction of MemAvailable")
    a = p.parse_args()
    a.configs = (a.configs or ("d2" if a.quick else "d2,d4,d6,d8,d10,d12")).split(",")
    for name in a.configs:
        c.family_shape(name)
    a.ranks = c.int_list(a.ranks or ("1,2" if a.quick else "1,2,4,8"), "--ranks", 1, c.MAX_RANKS)
    c.check_ranks(a.ranks, "--ranks", a.max_ranks, a.mpiexec)
    a.strategies = c.choice_list(a.strategies, "--strategies", ["full", "grad_op", "none", "hybrid"])
    c.check_shard_group(a.strategies, a.ranks, a.shard_group)
    a.recompute = c.choice_list(a.recompute, "--recompute", ["none", "full", "every:K", "selective"])
    for r in a.recompute:
        if r.startswith("every:"):
            k = int(r.split(":")[1])
            small = [n for n in a.configs if c.family_shape(n)[0] < k]
            if small:
                raise c.UserError(f"--recompute {r}: K exceeds the layers of {', '.join(small)}")
    a.offload = c.choice_list(a.offload, "--offload", ["none", "optimizer", "params"])
    for flag, v, lo in (("-B", a.B, 1), ("-T", a.T, 1), ("--steps", a.steps, 1)):
        if v < lo:
            raise c.UserError(f"{flag}: expected >= {lo}, got {v}")
    if not 0 < a.mem_fraction <= 1:
        raise c.UserError(f"--mem-fraction: expected (0, 1], got {a.mem_fraction}")
    return a


def group_of(shard, n, g):
    return {"full": n, "grad_op": n, "none": 1, "hybrid": g}[shard]


def estimate_ram(row, plan):
    """RAM for all ranks of a run (CPU: device and host domains are both RAM), plus process overhead."""
    n = row["N"]
    if plan:
        per = plan["device_peak_bytes"] + plan["host_peak_bytes"]
    else:
        units = c.unit_numels(row["L"], row["C"], c.BYTE_VOCAB, row["T"])
        per = row["formula_model_state_bytes"] + 4 * 4 * max(units) + 4 * row["psi"] // max(1, row["group"]) * 2
    return n * (per + 96 * 1048576)


def one_run(a, gpt, data, tmp, row, plan_ok, log):
    name = row["config"]
    mflags = c.model_flags(name, c.BYTE_VOCAB, a.T)
    strat = ["--shard", row["shard"]] + (["--shard-group", str(a.shard_group)] if row["shard"] == "hybrid" else [])
    modes = ["--recompute", row["recompute"], "--offload", row["offload"]]
    plan = c.memplan(gpt, mflags + strat + modes + ["--world", str(row["N"]), "-B", str(a.B), "-T", str(a.T)]) \
        if plan_ok else None
    if plan:
        row["memplan_model_state_bytes"] = plan["model_state_bytes"]
        row["memplan_device_peak_bytes"] = plan["device_peak_bytes"]
        row["memplan_host_peak_bytes"] = plan["host_peak_bytes"]
    avail = c.available_memory_bytes()
    if avail and estimate_ram(row, plan) > a.mem_fraction * avail:
        row["status"] = f"skipped: needs ~{estimate_ram(row, plan) / 2**30:.1f} GiB RAM"
        return
    metrics = Path(tmp) / f"{name}_{row['N']}_{row['shard']}_{row['recompute']}_{row['offload']}.jsonl"
    argv = [gpt, "train"] + mflags + strat + modes + [
        "--tokenizer", "byte", "--train", data, "-B", str(a.B), "-T", str(a.T), "--steps", str(a.steps),
        "--sample-tokens", "0", "--quiet", "--metrics", str(metrics)]
    rc, dt, out = c.run(c.launch(a, row["N"], argv), c.mpi_env(1), a.timeout, log)
    row["seconds"] = f"{dt:.1f}"
    m = c.read_metrics(metrics)
    if rc != 0 or not m:
        row["status"] = f"failed (rc {rc}): {c.last_error_line(out)}"
        return
    last = m[-1]
    row["measured_model_state_bytes"] = last["rank0_model_state_bytes"]
    row["measured_device_peak_bytes"] = int(last["max_rank_device_peak_bytes"])
    if plan and plan["device_peak_bytes"]:
        row["peak_rel_err"] = f"{(row['measured_device_peak_bytes'] - plan['device_peak_bytes']) / plan['device_peak_bytes']:.4f}"
    row["status"] = "ok"


def sweep(a, gpt, out):
    data, _ = c.ensure_byte_data(gpt)
    plan_ok = c.memplan_available(gpt)
    if not plan_ok:
        c.progress("gpt memplan is not available: the prediction columns read n/a (re-run once it exists)")
    rows = []
    tmp = c.scratch(NAME)
    log = Path(tmp) / "runs.log"
    total = len(a.configs) * len(a.ranks) * len(a.strategies) * len(a.recompute) * len(a.offload)
    for name in a.configs:
        L, _, C = c.family_shape(name)
        units = c.unit_numels(L, C, c.BYTE_VOCAB, a.T)
        for n in a.ranks:
            for shard in a.strategies:
                g = group_of(shard, n, a.shard_group)
                for rec in a.recompute:
                    for off in a.offload:
                        row = {"config": name, "L": L, "C": C, "psi": sum(units), "N": n, "shard": shard, "group": g,
                               "recompute": rec, "offload": off, "B": a.B, "T": a.T,
                               "formula_model_state_bytes": 16 * sum(c.pad_to(u, g) // g for u in units)}
                        one_run(a, gpt, data, tmp, row, plan_ok, log)
                        rows.append(row)
                        c.progress(f"[{len(rows)}/{total}] {name} N={n} {shard} recompute={rec} offload={off}: "
                                   f"states {c.mib(row.get('measured_model_state_bytes'))} MiB, peak "
                                   f"{c.mib(row.get('measured_device_peak_bytes'))} MiB "
                                   f"(memplan {c.mib(row.get('memplan_device_peak_bytes'))}) {row['status']}")
                        c.write_csv(out / f"{NAME}.csv", rows, FIELDS)
    c.finish_scratch(tmp, rows)
    return rows, plan_ok


def zero_rows(gpt, plan_ok):
    """ZeRO Table 1: the paper's numbers, the closed forms, and memplan's report (GB = 1e9 bytes)."""
    psi, K = 7.5e9, 12
    z = c.memplan(gpt, ["--zero-table"]) if plan_ok else None
    ours = {r["N"]: r for r in (z or {}).get("rows", [])}
    rows = []
    for n, paper in ZERO_PAPER.items():
        f = ((2 + 2 + K) * psi, 4 * psi + K * psi / n, 2 * psi + (2 + K) * psi / n, (2 + 2 + K) * psi / n)
        o = ours.get(n, {})
        rows.append({"N": n, "paper_baseline_gb": paper[0], "paper_os_gb": paper[1], "paper_os_g_gb": paper[2],
                     "paper_os_g_p_gb": paper[3], "formula_baseline_gb": f"{f[0] / 1e9:.2f}",
                     "formula_os_gb": f"{f[1] / 1e9:.2f}", "formula_os_g_gb": f"{f[2] / 1e9:.2f}",
                     "formula_os_g_p_gb": f"{f[3] / 1e9:.3f}",
                     "memplan_stage3_gb": c.na(o.get("stage3") and o["stage3"] / 1e9, "{:.3f}"),
                     "ours_cpu_f32_gb": c.na(o.get("ours_cpu_f32") and o["ours_cpu_f32"] / 1e9, "{:.3f}"),
                     "ours_gpu_states_gb": c.na(o.get("ours_gpu_states") and o["ours_gpu_states"] / 1e9, "{:.3f}"),
                     "ours_gpu_gather_slots_gb": c.na(o.get("ours_gpu_gather_slots") and
                                                      o["ours_gpu_gather_slots"] / 1e9, "{:.3f}")})
    return rows, (z or {}).get("ours_model", "n/a"), (z or {}).get("ours_psi", "n/a")


def plot(a, rows, path):
    from matplotlib.lines import Line2D

    ok = [r for r in rows if r["status"] == "ok"]
    colors = {n: plt.get_cmap("tab10")(i % 10) for i, n in enumerate(a.configs)}
    modes = [(x, y) for x in a.recompute for y in a.offload]
    mode_colors = {m: plt.get_cmap("Dark2")(k % 8) for k, m in enumerate(modes)}
    big = a.configs[-1]
    fig, axes = plt.subplots(3, len(a.strategies), figsize=(4.6 * len(a.strategies), 12.5), squeeze=False)
    for j, shard in enumerate(a.strategies):
        base = [r for r in ok if r["shard"] == shard and r["recompute"] == a.recompute[0] and r["offload"] == a.offload[0]]
        for i, (meas, pred, what) in enumerate((("measured_model_state_bytes", "memplan_model_state_bytes", "model states"),
                                                ("measured_device_peak_bytes", "memplan_device_peak_bytes", "device peak"))):
            ax = axes[i][j]
            for name in a.configs:
                rs = sorted([r for r in base if r["config"] == name], key=lambda r: r["N"])
                ax.plot([r["N"] for r in rs], [r[meas] / 2**20 for r in rs], "o-", color=colors[name])
                pr = [r for r in rs if r.get(pred) not in (None, "")]
                ax.plot([r["N"] for r in pr], [r[pred] / 2**20 for r in pr], "x--", color="black", ms=7, lw=0.8)
            ax.set_title(f"--shard {shard}: {what} per rank\n(recompute {a.recompute[0]}, offload {a.offload[0]})",
                         fontsize=9)
        ax = axes[2][j]
        for m in modes:
            rs = sorted([r for r in ok if r["shard"] == shard and r["config"] == big and (r["recompute"], r["offload"]) == m],
                        key=lambda r: r["N"])
            ax.plot([r["N"] for r in rs], [r["measured_device_peak_bytes"] / 2**20 for r in rs], "o-", color=mode_colors[m])
        ax.set_title(f"--shard {shard}: {big} device peak per rank, by mode", fontsize=9)
        for ax in axes[:, j]:
            ax.set_xscale("log", base=2)
            ax.set_yscale("log")
            ax.set_xticks(a.ranks)
            ax.set_xticklabels([str(n) for n in a.ranks])
            ax.autoscale_view()
            c.plain_log_ticks(ax)
            ax.set_xlabel("ranks N (log2 scale)")
            ax.set_ylabel("memory per rank (MiB, log scale)")
            ax.grid(alpha=0.3, which="both")
    model_handles = [Line2D([], [], color=colors[n], marker="o", label=f"{n} measured") for n in a.configs]
    model_handles.append(Line2D([], [], color="black", marker="x", linestyle="--", lw=0.8, label="gpt memplan prediction"))
    fig.legend(handles=model_handles, loc="upper center", bbox_to_anchor=(0.5, 0.355), ncol=len(model_handles),
               fontsize=8, title="rows 1-2: models (depth family dL: L layers, C = 64L)", title_fontsize=8)
    mode_handles = [Line2D([], [], color=mode_colors[m], marker="o", label=f"recompute {m[0]}, offload {m[1]}")
                    for m in modes]
    fig.legend(handles=mode_handles, loc="lower center", ncol=len(mode_handles), fontsize=8,
               title=f"row 3: modes ({big})", title_fontsize=8)
    fig.suptitle(f"Per-rank memory vs ranks (V=257, B={a.B}, T={a.T}; CPU fp32: 16 bytes per owned parameter)")
    fig.tight_layout(rect=(0, 0.05, 1, 0.97), h_pad=5.5)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def results_md(a, rows, zrows, zmodel, zpsi, plan_ok, out):
    ok = [r for r in rows if r["status"] == "ok"]
    same_plan = [r for r in ok if r.get("memplan_model_state_bytes") not in (None, "")]
    match = sum(1 for r in same_plan if r["measured_model_state_bytes"] == r["memplan_model_state_bytes"])
    formula = sum(1 for r in ok if r["measured_model_state_bytes"] == r["formula_model_state_bytes"])
    errs = [abs(float(r["peak_rel_err"])) for r in ok if r.get("peak_rel_err") not in (None, "")]
    peak_exact = sum(1 for r in same_plan if r["measured_device_peak_bytes"] == r.get("memplan_device_peak_bytes"))
    skipped = [r for r in rows if r["status"] != "ok"]
    cmd = c.command_line().replace(" --replot", "")  # the sweep that produced the CSV
    L = ["# ZeRO memory: measured per-rank memory vs gpt memplan and ZeRO's Table 1", "",
         f"Produced by `{cmd}`" + (" (tables and plot redrawn with --replot)." if a.replot else "."), "",
         f"Models: depth family dL (L layers, L heads, C = 64L), byte vocabulary V = 257 (Vp = 384), "
         f"seq-len = T = {a.T}, B = {a.B}, {a.steps} step(s) per run, CPU fp32, one thread per rank. "
         "Measured = `rank0_model_state_bytes` and `max_rank_device_peak_bytes` of the last step in "
         "`--metrics`; memplan = `gpt memplan --json` for the same flags; formula = 16 * sum_u ceil(psi_u / G) "
         "(fp32 param + grad + Adam m + v per owned parameter, units padded to the shard group G).", "",
         f"- runs: {len(rows)}, ok: {len(ok)}, skipped/failed: {len(skipped)}"
         + (f" ({'; '.join(sorted(set(r['config'] + ' N=' + str(r['N']) + ' ' + r['shard'] + ': ' + r['status'] for r in skipped)))})"
            if skipped else ""),
         f"- model states == formula, byte for byte: {formula}/{len(ok)}",
         f"- model states == memplan, byte for byte: {match}/{len(same_plan)}" if plan_ok else
         "- memplan: not available when this ran (n/a columns)",
         f"- device peak == memplan, byte for byte: {peak_exact}/{len(same_plan)}; max |relative error| "
         f"{max(errs):.2e}" if errs else "- device peak vs memplan: n/a", "", "![memory vs N](zero_memory.png)", "",
         "## ZeRO Table 1: 7.5B parameters, GB per device (GB = 1e9 bytes, K = 12)", "",
         "Paper = the published table (arXiv 1910.02054); formula = (2+2+K)Ψ, 4Ψ+KΨ/N, 2Ψ+(2+K)Ψ/N, "
         "(2+2+K)Ψ/N; memplan = `gpt memplan --zero-table --json`, whose 'ours' columns are our own "
         f"accounting (16 bytes per owned parameter) for the nearest depth-family model {zmodel} "
         f"(Ψ = {zpsi}) with --shard full.", ""]
    L.append(c.md_table(zrows, [
        ("N", lambda r: r["N"]), ("paper baseline", lambda r: r["paper_baseline_gb"]),
        ("paper P_os", lambda r: r["paper_os_gb"]), ("paper P_os+g", lambda r: r["paper_os_g_gb"]),
        ("paper P_os+g+p", lambda r: r["paper_os_g_p_gb"]), ("formula P_os", lambda r: r["formula_os_gb"]),
        ("formula P_os+g", lambda r: r["formula_os_g_gb"]), ("formula P_os+g+p", lambda r: r["formula_os_g_p_gb"]),
        ("memplan P_os+g+p", lambda r: r["memplan_stage3_gb"]), ("ours CPU fp32", lambda r: r["ours_cpu_f32_gb"]),
        ("ours GPU states", lambda r: r["ours_gpu_states_gb"]),
        ("ours GPU gather slots", lambda r: r["ours_gpu_gather_slots_gb"])]))
    L += ["", "## Per-rank memory of every run (MiB)", ""]
    L.append(c.md_table(rows, [
        ("model", lambda r: r["config"]), ("Psi", lambda r: r["psi"]), ("N", lambda r: r["N"]),
        ("shard", lambda r: r["shard"]), ("recompute", lambda r: r["recompute"]), ("offload", lambda r: r["offload"]),
        ("states measured", lambda r: c.mib(r.get("measured_model_state_bytes"))),
        ("states memplan", lambda r: c.mib(r.get("memplan_model_state_bytes"))),
        ("states 16Ψ/G", lambda r: c.mib(r.get("formula_model_state_bytes"))),
        ("peak measured", lambda r: c.mib(r.get("measured_device_peak_bytes"))),
        ("peak memplan", lambda r: c.mib(r.get("memplan_device_peak_bytes"))),
        ("rel err", lambda r: c.na(r.get("peak_rel_err"))), ("status", lambda r: r["status"])]))
    (out / "results.md").write_text("\n".join(L) + "\n")


def load_rows(out):
    path = out / f"{NAME}.csv"
    rows = c.read_csv(path)
    if not rows:
        raise c.UserError(f"--replot: {path} is missing or has no rows")
    for r in rows:
        for k, v in r.items():
            if v != "" and k not in ("peak_rel_err", "seconds") and v.lstrip("-").isdigit():
                r[k] = int(v)
    return rows


def main():
    a = parse()
    gpt = c.check_gpt(a.gpt)
    out = c.out_dir(a, NAME)
    if a.replot:
        rows, plan_ok = load_rows(out), c.memplan_available(gpt)
    else:
        rows, plan_ok = sweep(a, gpt, out)
    zrows, zmodel, zpsi = zero_rows(gpt, plan_ok)
    c.write_csv(out / "zero_table.csv", zrows, list(zrows[0].keys()))
    plot(a, rows, out / f"{NAME}.png")
    results_md(a, rows, zrows, zmodel, zpsi, plan_ok, out)
    c.progress(f"wrote {out}/{NAME}.csv, zero_table.csv, {NAME}.png, results.md")


if __name__ == "__main__":
    c.main_guard(main)
