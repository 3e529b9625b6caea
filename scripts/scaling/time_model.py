#!/usr/bin/python3
"""Plots of the time model: measured against predicted on this machine (from time_model_measure.py's CSVs)
and a predicted scaling sweep (`gpt memplan --sweep --json`) over world sizes and strategies.

  time_model.py measured [--out DIR]            OUT/measured_vs_predicted.png and OUT/measured.md from
                                                OUT/summary.csv and OUT/measured.csv
  time_model.py sweep --hardware FILE [--config d48 -B 8 -T 1024 --world-list 1,2,...,256 --attention fused]
                                                OUT/sweep_<config>_<hardware>.{csv,png,md}
"""
import argparse
import csv
import json
import statistics
import subprocess
import sys
from pathlib import Path

import common as c

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

NAME = "time_model"


def parse():
    p = c.base_parser(NAME, __doc__.splitlines()[0])
    p.add_argument("what", choices=["measured", "sweep"])
    p.add_argument("--hardware", default=None, help="sweep: a hardware file (data/hardware/*.json)")
    p.add_argument("--config", default="d48", help="sweep: preset (default d48)")
    p.add_argument("-B", type=int, default=8, help="sweep: per-rank micro-batch (default 8)")
    p.add_argument("-T", type=int, default=1024, help="sweep: sequence length (default 1024)")
    p.add_argument("--world-list", default="1,2,4,8,16,32,64,128,256", help="sweep: world sizes")
    p.add_argument("--strategies", default="full,grad_op,none,hybrid", help="sweep: --sweep-shard")
    p.add_argument("--attention", default="fused", choices=["simple", "fused"])
    p.add_argument("--recompute", default="none")
    a = p.parse_args()
    if a.what == "sweep" and not a.hardware:
        raise c.UserError("sweep: give --hardware FILE")
    return a


def measured(a, out):
    summ = out / "summary.csv"
    if not summ.exists():
        raise c.UserError(f"{summ}: run scripts/scaling/time_model_measure.py first")
    rows = list(csv.DictReader(open(summ)))
    runs = list(csv.DictReader(open(out / "measured.csv")))
    fig, ax = plt.subplots(1, 2, figsize=(13, 5.5))
    colors = {"1": "tab:blue", "2": "tab:orange", "4": "tab:green"}
    lo = min(min(float(r["measured_ms"]), float(r["predicted_ms"])) for r in rows) * 0.6
    hi = max(max(float(r["measured_ms"]), float(r["predicted_ms"])) for r in rows) * 1.6
    for r in runs:
        ax[0].scatter(float(r["measured_ms"]), float(r["predicted_ms"]), s=10, alpha=0.3, color=colors.get(r["N"], "k"))
    for r in rows:
        m, p = float(r["measured_ms"]), float(r["predicted_ms"])
        # the median is rounded to 0.1 ms in summary.csv, the extremes are not: clamp the bars at 0
        lo_bar, hi_bar = max(0.0, m - float(r["measured_min_ms"])), max(0.0, float(r["measured_max_ms"]) - m)
        ax[0].errorbar(m, p, xerr=[[lo_bar], [hi_bar]], fmt="o",
                       color=colors.get(r["N"], "k"), ms=5, capsize=2)
    xs = [lo, hi]
    ax[0].plot(xs, xs, "k-", lw=1)
    for f, style in ((0.15, "--"), (0.35, ":")):
        ax[0].plot(xs, [x * (1 + f) for x in xs], "k" + style, lw=0.8)
        ax[0].plot(xs, [x * (1 - f) for x in xs], "k" + style, lw=0.8)
    ax[0].set_xscale("log")
    ax[0].set_yscale("log")
    ax[0].set_xlim(lo, hi)
    ax[0].set_ylim(lo, hi)
    ax[0].set_xlabel("measured ms/step (median over rounds; bars: min-max of the rounds)")
    ax[0].set_ylabel("predicted ms/step (median over rounds)")
    ax[0].set_title("time model vs gpt bench on this 2-core machine\n(dots: single runs; --: ±15%, ··: ±35%)")
    for n, col in colors.items():
        ax[0].scatter([], [], color=col, label=f"N = {n}")
    ax[0].legend(loc="upper left")
    errs = sorted(100 * float(r["error"]) for r in rows)
    ax[1].barh(range(len(rows)), [100 * float(r["error"]) for r in rows],
               color=[colors.get(r["N"], "k") for r in rows])
    ax[1].set_yticks(range(len(rows)))
    ax[1].set_yticklabels([r["config"] for r in rows], fontsize=7)
    for f in (15, 35):
        ax[1].axvline(f, color="k", ls="--" if f == 15 else ":", lw=0.8)
        ax[1].axvline(-f, color="k", ls="--" if f == 15 else ":", lw=0.8)
    ax[1].axvline(0, color="k", lw=0.8)
    ax[1].set_xlabel("error = (predicted - measured) / measured, %")
    ax[1].invert_yaxis()
    abs_e = sorted(abs(e) for e in errs)
    ax[1].set_title(f"median |error| {statistics.median(abs_e):.1f}%, max {max(abs_e):.1f}%")
    fig.tight_layout()
    fig.savefig(out / "measured_vs_predicted.png", dpi=120)
    with open(out / "measured.md", "w") as f:
        f.write("| configuration | N | measured ms (median) | min-max over rounds | predicted ms (median) | error | "
                "median paired error | load (1-min) |\n|---|---|---|---|---|---|---|---|\n")
        for r in rows:
            f.write(f"| {r['config']} | {r['N']} | {float(r['measured_ms']):.0f} | {float(r['measured_min_ms']):.0f}-"
                    f"{float(r['measured_max_ms']):.0f} | {float(r['predicted_ms']):.0f} | {100 * float(r['error']):+.1f}% | "
                    f"{100 * float(r['median_paired_error']):+.1f}% | {float(r['load_min']):.1f}-{float(r['load_max']):.1f} |\n")
        f.write(f"\n{len(rows)} configurations: median |error| {statistics.median(abs_e):.1f}%, max {max(abs_e):.1f}%; "
                f"{sum(e <= 15 for e in abs_e)} within 15%, {sum(e <= 35 for e in abs_e)} within 35%.\n")
        pe = sorted(abs(100 * float(r["error"])) for r in runs)
        f.write(f"All {len(runs)} single runs (each against the prediction from its own calibration): median "
                f"|error| {statistics.median(pe):.1f}%, max {max(pe):.1f}%.\n")
    print(f"wrote {out / 'measured_vs_predicted.png'} and {out / 'measured.md'}")


def sweep(a, out):
    gpt = c.check_gpt(a.gpt)
    hw = Path(a.hardware)
    if not hw.is_file():
        hw = c.REPO / a.hardware
    if not hw.is_file():
        raise c.UserError(f"--hardware {a.hardware}: no such file")
    cmd = [gpt, "memplan", "--device", "cuda", "--config", a.config, "-B", str(a.B), "-T", str(a.T), "--attention",
           a.attention, "--recompute", a.recompute, "--sweep", "--sweep-world", a.world_list, "--sweep-shard",
           a.strategies, "--hardware", str(hw), "--json"]
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=a.timeout)
    if p.returncode != 0:
        raise c.UserError(f"gpt memplan --sweep failed: {p.stdout.strip()[-300:]}")
    rows = [json.loads(x) for x in p.stdout.splitlines() if x.startswith("{")]
    tag = f"{a.config}_{hw.stem}"
    fields = ["world", "shard", "group", "B", "T", "step_ms", "tokens_per_s", "tokens_per_s_per_rank", "mfu",
              "compute_ms", "comm_ms", "exposed_comm_ms", "device_peak_bytes", "fits"]
    with open(out / f"sweep_{tag}.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=fields + ["skipped"])
        w.writeheader()
        for r in rows:
            w.writerow(r)
    ok = [r for r in rows if "skipped" not in r]
    fig, ax = plt.subplots(1, 2, figsize=(12, 4.8))
    for st in a.strategies.split(","):
        rs = [r for r in ok if r["shard"] == st]
        if not rs:
            continue
        ax[0].plot([r["world"] for r in rs], [r["tokens_per_s_per_rank"] for r in rs], "o-", label=st)
        for r in rs:
            if not r["fits"]:
                ax[0].plot(r["world"], r["tokens_per_s_per_rank"], "x", color="red", ms=10)
        ax[1].plot([r["world"] for r in rs], [100 * r["exposed_comm_ms"] / r["step_ms"] for r in rs], "o-", label=st)
    for x in ax:
        x.set_xscale("log", base=2)
        x.set_xlabel("ranks N (GPUs)")
        x.legend()
    ax[0].set_ylabel("tokens/s per GPU (predicted)")
    ax[0].set_title(f"{a.config} B={a.B} T={a.T} on {json.load(open(hw))['name'][:60]}\n(red x: does not fit memory)",
                    fontsize=9)
    ax[1].set_ylabel("exposed communication, % of the step")
    ax[1].set_title("communication the schedule does not hide", fontsize=9)
    fig.tight_layout()
    fig.savefig(out / f"sweep_{tag}.png", dpi=120)
    with open(out / f"sweep_{tag}.md", "w") as f:
        f.write(f"`{' '.join(['gpt'] + cmd[1:]).replace(str(c.REPO) + '/', '')}`\n\n")
        f.write("| N | shard | G | step ms | tokens/s | tokens/s per GPU | MFU | exposed comm ms | peak GiB | fits |\n"
                "|---|---|---|---|---|---|---|---|---|---|\n")
        for r in rows:
            if "skipped" in r:
                continue
            f.write(f"| {r['world']} | {r['shard']} | {r['group']} | {r['step_ms']:.1f} | {r['tokens_per_s']:.0f} | "
                    f"{r['tokens_per_s_per_rank']:.0f} | {100 * r['mfu']:.1f}% | {r['exposed_comm_ms']:.1f} | "
                    f"{r['device_peak_bytes'] / 2**30:.1f} | {'yes' if r['fits'] else 'no'} |\n")
    print(f"wrote {out / ('sweep_' + tag + '.png')}, .csv and .md")


def main():
    a = parse()
    out = c.out_dir(a, NAME)
    if a.what == "measured":
        measured(a, out)
    else:
        sweep(a, out)


if __name__ == "__main__":
    c.main_guard(main)
