#!/usr/bin/python3
"""--wrap blocks:K on N CPU ranks, measured and predicted in the same rounds: the collectives per step and
their bytes (the real run's trace and communication ledger against the simulated step's), the gathered
parameters (the run's ledger and its "gathered params in use" counter against memplan's gathered_param), the
device peak (the ledger against memplan) and the step time (gpt bench against gpt memplan --time on a
calibration made in the same round).

  scripts/scaling/wrap_sweep.py [--wraps 1,2,4,12] [--ranks 4] [--config d12] [-B 1 -T 64] [--rounds 2] [--out DIR] [--quick]
Writes OUT/wrap_sweep.csv, OUT/wrap_sweep.md and OUT/wrap_sweep.png (run log and hardware files in OUT/work/).
"""
import re
import statistics

import common as c
import trace_util as tu

NAME = "wrap_sweep"


def parse():
    p = c.base_parser(NAME, __doc__.splitlines()[0])
    p.add_argument("--wraps", default="1,2,4,12", help="blocks per sharding unit, as --wrap blocks:K (default 1,2,4,12)")
    p.add_argument("--ranks", type=int, default=4)
    p.add_argument("--config", default="d12")
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--steps", type=int, default=3, help="timed steps per gpt bench (after its warm-up step)")
    p.add_argument("-B", type=int, default=1)
    p.add_argument("-T", type=int, default=64)
    a = p.parse_args()
    if a.quick:  # 2 ranks, d2, blocks:1 and blocks:2, one round, a quick calibration: well under a minute
        a.ranks, a.config, a.wraps, a.rounds, a.steps = 2, "d2", "1,2", 1, 2
    a.gpt = c.check_gpt(a.gpt)
    L = c.family_shape(a.config)[0]
    a.wraps = c.int_list(a.wraps, "--wraps", 1, L)
    if a.ranks < 2 or a.ranks > c.MAX_RANKS:
        raise c.UserError(f"--ranks {a.ranks}: expected 2 to {c.MAX_RANKS} (one rank has nothing to shard)")
    if a.rounds < 1 or a.steps < 1 or a.B < 1 or a.T < 1:
        raise c.UserError("--rounds, --steps, -B and -T must be >= 1")
    c.check_ranks([a.ranks], "--ranks", c.MAX_RANKS, a.mpiexec)
    return a


def measured_collectives(path):
    """Rank 0's last complete step of a `gpt train --trace` run: all-gathers and reduce-scatters issued
    (spans on the gather and reduce slot tracks) and the peak of the "gathered params in use" counter."""
    ev = tu.load(path)
    sp = tu.spans(ev, 0)
    (t0, t1), _ = tu.last_step_window(sp, 0)
    inside = lambda s: t0 <= s[2] < t1
    gathers = sum(1 for tid, v in sp.items() if tu.GATHER0 <= tid < tu.REDUCE0 for s in v if inside(s))
    reduces = sum(1 for tid, v in sp.items() if tid >= tu.REDUCE0 for s in v if inside(s))
    gathered = max((b for _, b in tu.counters(ev, 0).get("gathered params in use", [])), default=None)
    return gathers, reduces, gathered


def plot(rows, wraps, a, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4.2))
    med = lambda K, k: statistics.median(r[k] for r in rows if r["K"] == K)
    lo = [med(K, "step_ms_measured") - min(r["step_ms_measured"] for r in rows if r["K"] == K) for K in wraps]
    hi = [max(r["step_ms_measured"] for r in rows if r["K"] == K) - med(K, "step_ms_measured") for K in wraps]
    ax1.errorbar(wraps, [med(K, "step_ms_measured") for K in wraps], yerr=[lo, hi], marker="o", capsize=4,
                 label="measured (gpt bench, median; bars: range over rounds)")
    ax1.plot(wraps, [med(K, "step_ms_predicted") for K in wraps], marker="s", ls="--",
             label="predicted (gpt memplan --time, same-round calibration)")
    ax1.set_xscale("log", base=2)
    ax1.set_xticks(wraps)
    ax1.set_xticklabels([str(K) for K in wraps])
    ax1.set_xlabel("blocks per sharding unit (--wrap blocks:K)")
    ax1.set_ylabel("ms per step")
    ax1.set_ylim(bottom=0)
    ax1.set_title(f"{a.config}, {a.ranks} CPU ranks, -B {a.B} -T {a.T}: step time")
    ax1.legend(fontsize=8, loc="lower left")
    first = {K: next(r for r in rows if r["K"] == K) for K in wraps}
    ax2.plot(wraps, [first[K]["collectives_measured"] for K in wraps], marker="o", label="collectives, measured (trace)")
    ax2.plot(wraps, [first[K]["collectives_predicted"] for K in wraps], marker="s", ls="--",
             label="collectives, predicted (simulated step)")
    ax2.set_xscale("log", base=2)
    ax2.set_xticks(wraps)
    ax2.set_xticklabels([str(K) for K in wraps])
    ax2.set_xlabel("blocks per sharding unit (--wrap blocks:K)")
    ax2.set_ylabel("collectives per step per rank")
    ax2.set_ylim(bottom=0)
    ax3 = ax2.twinx()
    ax3.plot(wraps, [first[K]["gathered_ledger_measured"] / 2**20 for K in wraps], marker="^", color="tab:red",
             label="gather slots, MiB (ledger)")
    ax3.set_ylabel("gathered params: gather slots (MiB)", color="tab:red")
    ax3.set_ylim(bottom=0)
    h1, l1 = ax2.get_legend_handles_labels()
    h2, l2 = ax3.get_legend_handles_labels()
    ax2.legend(h1 + h2, l1 + l2, fontsize=8, loc="upper center")
    ax2.set_title("fewer, larger collectives; K-fold gather slots")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main():
    a = parse()
    out = c.out_dir(a, NAME)
    work = out / "work"
    work.mkdir(parents=True, exist_ok=True)
    log = work / "run.log"
    log.write_text("")
    env = c.mpi_env(1)  # one thread per rank, as time_model_measure.py launches them
    env["OMPI_MCA_mpi_yield_when_idle"] = "1"
    env["GPT_CACHE_DIR"] = str(work / "cache")  # the calibration's MFU peak stays here, not in the user's cache
    shard = str(c.REPO / "data" / "tinyshakespeare_byte" / "train_000000.bin")  # bench, train, memplan: vocab 257
    data = str(c.REPO / "data" / "tinyshakespeare_byte" / "train_*.bin")
    model = ["--config", a.config, "-B", str(a.B), "-T", str(a.T)]
    traced = {}
    rows = []
    for r in range(a.rounds):
        hw = work / f"round{r + 1}_N{a.ranks}.json"
        quick = ["--quick"] if a.quick else []
        c.progress(f"round {r + 1}: calibrating {a.ranks} ranks into {hw.name}")
        rc, _, txt = c.run(c.launch(a, a.ranks, [a.gpt, "bench", "--calibrate", "--out", str(hw), *quick]), env,
                           a.timeout, log)
        if rc != 0:
            raise c.UserError(f"calibration failed: {txt.strip()[-300:]}")
        for K in a.wraps[r % len(a.wraps):] + a.wraps[:r % len(a.wraps)]:  # the order rotates between rounds
            wrap = ["--wrap", f"blocks:{K}"]
            rc, _, txt = c.run(c.launch(a, a.ranks, [a.gpt, "bench", *model, "--train", shard, *wrap, "--steps",
                                                      str(a.steps), "--json"]), env, a.timeout, log)
            meas = c.last_json(txt) if rc == 0 else None
            if meas is None:
                raise c.UserError(f"gpt bench --wrap blocks:{K} failed: {txt.strip()[-300:]}")
            if K not in traced:  # counts and bytes are deterministic: one traced run per wrap
                tr, mt = work / f"measured_K{K}.json", work / f"metrics_K{K}.jsonl"
                rc, _, txt = c.run(c.launch(a, a.ranks, [a.gpt, "train", *model, "--train", data, *wrap, "--steps",
                                                          "2", "--tokenizer", "none", "--lr", "1e-4",
                                                          "--trace", str(tr), "--metrics", str(mt)]),
                                   env, a.timeout, log)
                if rc != 0:
                    raise c.UserError(f"gpt train --trace --wrap blocks:{K} failed: {txt.strip()[-300:]}")
                g, rs, peak = measured_collectives(tr)
                met = c.read_metrics(mt)
                slots = re.search(r"rank 0 memory: .*? gather slots ([0-9.]+) MiB", txt)
                traced[K] = {"gathers": g, "reduces": rs, "gathered_peak": peak,
                             "gathered_ledger": round(float(slots.group(1)) * 2**20) if slots else None,
                             "bytes_sent": met[-1].get("max_rank_bytes_sent") if met else None}
            rc, _, txt = c.run([a.gpt, "memplan", *model, "--train", shard, "--world", str(a.ranks), *wrap, "--time",
                                "--hardware", str(hw), "--json"], env, a.timeout, log)
            pred = c.last_json(txt) if rc == 0 else None
            if pred is None:
                raise c.UserError(f"gpt memplan --wrap blocks:{K} failed: {txt.strip()[-300:]}")
            t, m = pred["time"], traced[K]
            row = {"round": r + 1, "K": K, "units": len(t["units"]),
                   "all_gathers_measured": m["gathers"], "all_gathers_predicted": t["calls"]["all_gather"],
                   "reduce_scatters_measured": m["reduces"], "reduce_scatters_predicted": t["calls"]["reduce_scatter"],
                   "collectives_measured": m["gathers"] + m["reduces"],
                   "collectives_predicted": sum(t["calls"].values()),
                   "bytes_measured": m["bytes_sent"], "bytes_predicted": sum(t["bytes"].values()),
                   "gathered_ledger_measured": m["gathered_ledger"], "gathered_in_use_peak_measured": m["gathered_peak"],
                   "gathered_param_predicted": pred["device_bytes"]["gathered_param"],
                   "device_peak_measured": meas["peak_device_bytes"], "device_peak_predicted": pred["device_peak_bytes"],
                   "step_ms_measured": round(meas["ms_per_step"], 1), "step_ms_predicted": round(t["step_ms"], 1),
                   "exposed_comm_ms_predicted": round(t["exposed_comm_ms"], 1)}
            rows.append(row)
            c.progress(str(row))
    fields = list(rows[0].keys())
    c.write_csv(out / "wrap_sweep.csv", rows, fields)
    med = lambda K, k: statistics.median(x[k] for x in rows if x["K"] == K)
    first = {K: next(x for x in rows if x["K"] == K) for K in a.wraps}
    lines = [f"# --wrap blocks:K on {a.ranks} CPU ranks ({a.config}, -B {a.B} -T {a.T}), {a.rounds} interleaved "
             f"round(s)", "",
             "Per rank and step. Collectives: all-gathers + reduce-scatters (measured: spans on rank 0's gather and "
             "reduce slot tracks of `gpt train --trace`; predicted: the simulated step's calls). Bytes: sent per "
             "rank (measured: the run's communication ledger, metrics `max_rank_bytes_sent`). Gathered: the run's "
             "ledger of gathered parameters (the gather slots and the root unit, allocated at start, as `gpt train` "
             "prints it), the peak of the trace's `gathered params in use` counter, and memplan's "
             "`gathered_param`. Step ms: median over "
             "rounds of `gpt bench` (median of its steps) against `gpt memplan --time` on that round's calibration.",
             "",
             "| blocks:K | units | all-gathers (meas / pred) | reduce-scatters (meas / pred) | MiB sent (meas / pred) | "
             "gathered MiB (ledger / in use at peak / memplan) | device peak MiB (ledger / memplan) | step ms (meas / pred) | "
             "meas / pred |", "|---|---|---|---|---|---|---|---|---|"]
    for K in a.wraps:
        f = first[K]
        ms, ps = med(K, "step_ms_measured"), med(K, "step_ms_predicted")
        lines.append(f"| {K} | {f['units']} | {f['all_gathers_measured']} / {f['all_gathers_predicted']} | "
                     f"{f['reduce_scatters_measured']} / {f['reduce_scatters_predicted']} | {c.mib(f['bytes_measured'])} / "
                     f"{c.mib(f['bytes_predicted'])} | {c.mib(f['gathered_ledger_measured'])} / "
                     f"{c.mib(f['gathered_in_use_peak_measured'])} / "
                     f"{c.mib(f['gathered_param_predicted'])} | {c.mib(f['device_peak_measured'])} / "
                     f"{c.mib(f['device_peak_predicted'])} | {ms:.0f} / {ps:.0f} | {ms / ps:.2f} |")
    lines += ["", "Every run (step ms measured / predicted):", "",
              "| round | " + " | ".join(f"blocks:{K}" for K in a.wraps) + " |", "|---|" + "---|" * len(a.wraps)]
    for r in range(1, a.rounds + 1):
        cell = {x["K"]: f"{x['step_ms_measured']:.0f} / {x['step_ms_predicted']:.0f}" for x in rows if x["round"] == r}
        lines.append(f"| {r} | " + " | ".join(cell[K] for K in a.wraps) + " |")
    lines += ["", f"Command: `{c.command_line()}`"]
    (out / "wrap_sweep.md").write_text("\n".join(lines) + "\n")
    plot(rows, a.wraps, a, out / "wrap_sweep.png")
    print("\n".join(lines))
    print(f"wrote {out / 'wrap_sweep.csv'}, {out / 'wrap_sweep.md'} and {out / 'wrap_sweep.png'}")


if __name__ == "__main__":
    c.main_guard(main)
