#!/usr/bin/python3
"""The time model against this machine: for each configuration, calibrate, predict, then measure.

Protocol, per round and per configuration (the rounds interleave the configurations; each round starts
one configuration later than the previous one):
  1. calibrate: a fresh hardware file from `gpt bench --calibrate` at the configuration's rank count
     (sgemm, streaming and memcpy rates of N ranks running at once; MPI collective fits at N > 1). Nothing
     is fitted to training steps: the calibration times microbenchmarks only. With --calibration round
     (a calibration costs 25-190 s here) one file per rank count and round serves that round's
     configurations at that N.
  2. predict: `gpt memplan --time --hardware FILE --json` for the configuration (step_ms).
  3. measure: `gpt bench --json --steps S` (median ms/step over S steps after a warm-up step).
With --old-gpt PATH a second binary (an older planner, built beside this one) predicts from the same
hardware file in the same round (predicted_old_ms), so two planners are judged on the same measurements.
The load average is recorded before and after each measurement. Multi-rank runs use
`mpiexec --oversubscribe --bind-to none`, one OpenMP/OpenBLAS thread per rank, and OpenMPI's
yield-when-idle mode (OMPI_MCA_mpi_yield_when_idle=1) for calibration and measurement alike: on a shared
2-core machine a busy-polling rank otherwise holds a core its peer needs.

Writes OUT/measured.csv (one row per round and configuration), OUT/summary.csv (per configuration: median
predicted and measured over the rounds, error), OUT/calibration/ (every hardware file used) and prints the
error distribution. Plot with scripts/scaling/time_model.py.
"""
import csv
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import common as c

NAME = "time_model"

# (label, preset, ranks, extra flags): d2..d12, N = 1, 2, 4, the strategies, recompute and offload, and
# tensor parallelism (--tp 2 and 4, with and without sequence parallelism, alone and x 2 data-parallel ranks).
CONFIGS = [
    ("d2 N1 full", "d2", 1, []),
    ("d4 N1 full", "d4", 1, []),
    ("d6 N1 full", "d6", 1, []),
    ("d12 N1 full", "d12", 1, []),
    ("d6 N1 recompute full", "d6", 1, ["--recompute", "full"]),
    ("d6 N1 recompute selective", "d6", 1, ["--recompute", "selective"]),
    ("d6 N1 offload optimizer", "d6", 1, ["--offload", "optimizer"]),
    ("d12 N1 recompute every:2", "d12", 1, ["--recompute", "every:2"]),
    ("d2 N2 full", "d2", 2, []),
    ("d4 N2 full", "d4", 2, []),
    ("d6 N2 full", "d6", 2, []),
    ("d6 N2 grad_op", "d6", 2, ["--shard", "grad_op"]),
    ("d6 N2 none", "d6", 2, ["--shard", "none"]),
    ("d12 N2 full", "d12", 2, []),
    ("d6 N2 full recompute full", "d6", 2, ["--recompute", "full"]),
    ("d6 N2 full offload optimizer", "d6", 2, ["--offload", "optimizer"]),
    ("d4 N2 full reduce bf16", "d4", 2, ["--reduce-dtype", "bf16"]),
    ("d4 N4 full", "d4", 4, []),
    ("d6 N4 full", "d6", 4, []),
    ("d6 N4 grad_op", "d6", 4, ["--shard", "grad_op"]),
    ("d6 N4 none", "d6", 4, ["--shard", "none"]),
    ("d6 N4 hybrid G2", "d6", 4, ["--shard", "hybrid", "--shard-group", "2"]),
    ("d12 N4 full", "d12", 4, []),
    ("d6 N4 full offload params", "d6", 4, ["--offload", "params"]),
    # tensor parallelism: -B is per data-parallel rank (the ranks of a group share their sequences)
    ("d4 N2 tp2", "d4", 2, ["--tp", "2"]),
    ("d6 N2 tp2", "d6", 2, ["--tp", "2"]),
    ("d12 N2 tp2", "d12", 2, ["--tp", "2"]),
    ("d6 N2 tp2 sp off", "d6", 2, ["--tp", "2", "--sequence-parallel", "off"]),
    ("d6 N2 tp2 recompute full", "d6", 2, ["--tp", "2", "--recompute", "full"]),
    ("d4 N4 tp4", "d4", 4, ["--tp", "4"]),
    ("d4 N4 tp2 x dp2 full", "d4", 4, ["--tp", "2"]),
    ("d6 N4 tp2 x dp2 full", "d6", 4, ["--tp", "2"]),
    ("d6 N4 tp2 x dp2 sp off", "d6", 4, ["--tp", "2", "--sequence-parallel", "off"]),
    ("d12 N4 tp4", "d12", 4, ["--tp", "4"]),
]


def parse():
    p = c.base_parser(NAME, __doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=3, help="rounds over all configurations (default 3; quick 1)")
    p.add_argument("--steps", type=int, default=8, help="timed steps per gpt bench (default 8; quick 2)")
    p.add_argument("--only", default=None, help="comma-separated labels (or substrings) of configurations to run")
    p.add_argument("--calibration", choices=("config", "round"), default="config",
                   help="a fresh hardware file per configuration (default), or one per rank count and round "
                        "(reused by that round's configurations at the same N; quick)")
    p.add_argument("--old-gpt", default=None, help="a second gpt binary whose prediction is recorded beside this one's")
    p.add_argument("-B", type=int, default=4, help="per-rank micro-batch (default 4)")
    p.add_argument("-T", type=int, default=64, help="sequence length (default 64)")
    a = p.parse_args()
    if a.quick:
        a.rounds, a.steps, a.calibration = 1, 2, "round"
    for flag, v in (("--rounds", a.rounds), ("--steps", a.steps), ("-B", a.B), ("-T", a.T)):
        if v < 1:
            raise c.UserError(f"{flag}: must be >= 1, got {v}")
    a.gpt = c.check_gpt(a.gpt)
    configs = CONFIGS
    if a.quick:
        configs = [x for x in CONFIGS if x[0] in ("d2 N1 full", "d2 N2 full")]
    if a.only:
        keys = [k.strip() for k in a.only.split(",") if k.strip()]
        configs = [x for x in CONFIGS if any(k == x[0] or k in x[0] for k in keys)]
        if not configs:
            raise c.UserError(f"--only {a.only}: matches no configuration")
    a.configs = configs
    return a


def loadavg():
    with open("/proc/loadavg") as f:
        return float(f.read().split()[0])


def env_for(n):
    e = c.mpi_env(1 if n > 1 else os.cpu_count())
    if n == 1:
        e.pop("OMP_NUM_THREADS", None)
        e.pop("OPENBLAS_NUM_THREADS", None)
    e["OMPI_MCA_mpi_yield_when_idle"] = "1"
    return e


def main():
    a = parse()
    out = c.out_dir(a, NAME)
    cal = out / "calibration"
    cal.mkdir(parents=True, exist_ok=True)
    log = out / "measure.log"
    log.write_text("")
    rows = []
    model = ["-B", str(a.B), "-T", str(a.T)]
    t_start = time.time()
    for r in range(a.rounds):
        order = a.configs[r % len(a.configs):] + a.configs[:r % len(a.configs)]
        calibrated = {}  # N -> (file, load, seconds) for --calibration round
        for label, preset, n, extra in order:
            env = env_for(n)
            if a.calibration == "round" and n in calibrated:
                hw, load_cal, secs = calibrated[n]
            else:
                hw, load_cal, secs = calibrate(a, cal, r, label if a.calibration == "config" else f"N{n}", n, env, log)
                calibrated[n] = (hw, load_cal, secs)
            rc, _, txt = c.run([a.gpt, "memplan", "--config", preset, "--world", str(n), *model, *extra, "--time",
                                "--hardware", str(hw), "--json"], env, a.timeout, log)
            pred = c.last_json(txt) if rc == 0 else None
            if pred is None:
                raise c.UserError(f"memplan --time failed for {label}: {txt.strip()[-300:]}")
            old = None
            if a.old_gpt:
                rc, _, txt = c.run([a.old_gpt, "memplan", "--config", preset, "--world", str(n), *model, *extra,
                                    "--time", "--hardware", str(hw), "--json"], env, a.timeout, log)
                old = c.last_json(txt) if rc == 0 else None
                if old is None:
                    raise c.UserError(f"--old-gpt memplan --time failed for {label}: {txt.strip()[-300:]}")
            load_before = loadavg()
            rc, _, txt = c.run(c.launch(a, n, [a.gpt, "bench", "--config", preset, *model, *extra, "--steps",
                                               str(a.steps), "--json"]), env, a.timeout, log)
            load_after = loadavg()
            meas = c.last_json(txt) if rc == 0 else None
            if meas is None:
                raise c.UserError(f"gpt bench failed for {label}: {txt.strip()[-300:]}")
            t = pred["time"]
            row = {"round": r + 1, "config": label, "preset": preset, "N": n, "flags": " ".join(extra),
                   "predicted_ms": round(t["step_ms"], 2), "measured_ms": round(meas["ms_per_step"], 2),
                   "error": round((t["step_ms"] - meas["ms_per_step"]) / meas["ms_per_step"], 4),
                   "predicted_exposed_comm_ms": round(t["exposed_comm_ms"], 2),
                   "predicted_compute_ms": round(t["compute_ms"], 2), "load_calibrate": load_cal,
                   "load_before": load_before, "load_after": load_after, "calibration_s": round(secs, 1),
                   "hardware_file": str(hw.relative_to(out))}
            if old is not None:
                row["predicted_old_ms"] = round(old["time"]["step_ms"], 2)
                row["error_old"] = round((old["time"]["step_ms"] - meas["ms_per_step"]) / meas["ms_per_step"], 4)
            rows.append(row)
            print(f"[{time.time() - t_start:6.0f}s] round {r + 1} {label:32s} predicted {row['predicted_ms']:9.1f} "
                  f"measured {row['measured_ms']:9.1f} error {100 * row['error']:+6.1f}%  load {load_before:.2f}->"
                  f"{load_after:.2f}", flush=True)
            write(out, rows)
    summarize(out, rows)


def calibrate(a, cal, r, tag, n, env, log):
    """A fresh hardware file from `gpt bench --calibrate` at n ranks: (path, load average, seconds)."""
    hw = cal / f"round{r + 1}_{tag.replace(' ', '_').replace(':', '')}.json"
    if hw.exists():
        hw.unlink()
    load = loadavg()
    quick = ["--quick"] if a.quick else []  # fewer sizes and repetitions: seconds instead of a minute
    rc, secs, txt = c.run(c.launch(a, n, [a.gpt, "bench", "--calibrate", "--out", str(hw), *quick]), env, a.timeout,
                          log)
    if rc != 0:
        raise c.UserError(f"calibration failed for {tag}: {txt.strip().splitlines()[-1] if txt.strip() else rc}")
    return hw, load, secs


def write(out, rows):
    fields = list(rows[0].keys())
    with open(out / "measured.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=fields)
        w.writeheader()
        w.writerows(rows)


def summarize(out, rows):
    by = {}
    for r in rows:
        by.setdefault(r["config"], []).append(r)
    summary = []
    for label, rs in by.items():
        pred = statistics.median(x["predicted_ms"] for x in rs)
        meas = statistics.median(x["measured_ms"] for x in rs)
        paired = statistics.median(x["error"] for x in rs)
        summary.append({"config": label, "N": rs[0]["N"], "rounds": len(rs), "predicted_ms": round(pred, 1),
                        "measured_ms": round(meas, 1), "error": round((pred - meas) / meas, 4),
                        "median_paired_error": round(paired, 4),
                        "measured_min_ms": min(x["measured_ms"] for x in rs),
                        "measured_max_ms": max(x["measured_ms"] for x in rs),
                        "load_min": min(x["load_before"] for x in rs), "load_max": max(x["load_after"] for x in rs)})
        if "predicted_old_ms" in rs[0]:
            old = statistics.median(x["predicted_old_ms"] for x in rs)
            summary[-1]["predicted_old_ms"] = round(old, 1)
            summary[-1]["error_old"] = round((old - meas) / meas, 4)
    with open(out / "summary.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(summary[0].keys()))
        w.writeheader()
        w.writerows(summary)
    errs = sorted(abs(s["error"]) for s in summary)
    paired = sorted(abs(r["error"]) for r in rows)
    print(f"{len(summary)} configurations: median |error| {100 * statistics.median(errs):.1f}%, max "
          f"{100 * max(errs):.1f}% (medians over rounds); over all {len(rows)} paired runs: median "
          f"{100 * statistics.median(paired):.1f}%, max {100 * max(paired):.1f}%")
    if "error_old" in summary[0]:
        old = sorted(abs(s["error_old"]) for s in summary)
        print(f"--old-gpt on the same rounds: median |error| {100 * statistics.median(old):.1f}%, max "
              f"{100 * max(old):.1f}% (medians over rounds)")


if __name__ == "__main__":
    c.main_guard(main)
