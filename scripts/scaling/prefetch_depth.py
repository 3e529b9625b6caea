#!/usr/bin/python3
"""--gather-slots K on N CPU ranks, measured and predicted in the same rounds: the all-gathers in flight
while a unit computes (from the trace of a real run and from the trace of the simulated step, read by the
same function), the device peak (the ledger against memplan) and the step time (gpt bench against
gpt memplan --time on a calibration made in the same round).

  scripts/scaling/prefetch_depth.py [--slots 2,3,4] [--ranks 4] [--config d6] [--rounds 2] [--out DIR] [--quick]
Writes OUT/prefetch_depth.csv and OUT/prefetch_depth.md.
"""
import csv
import statistics
from pathlib import Path

import common as c
import trace_util as tu

NAME = "time_model"


def parse():
    p = c.base_parser(NAME, __doc__.splitlines()[0])
    p.add_argument("--slots", default="2,3,4")
    p.add_argument("--ranks", type=int, default=4)
    p.add_argument("--config", default="d6")
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--steps", type=int, default=4)
    p.add_argument("-B", type=int, default=4)
    p.add_argument("-T", type=int, default=64)
    a = p.parse_args()
    if a.quick:  # 2 ranks, d2, K = 1 and 2, one round, a quick calibration: about half a minute
        a.ranks, a.config, a.slots, a.rounds, a.steps = 2, "d2", "1,2", 1, 2
    a.gpt = c.check_gpt(a.gpt)
    try:
        a.slots = [int(x) for x in a.slots.split(",")]
    except ValueError:
        raise c.UserError(f"--slots {a.slots}: expected a comma-separated list of integers like 2,3,4")
    if any(k < 1 for k in a.slots) or a.ranks < 2 or a.rounds < 1:
        raise c.UserError("--slots must be >= 1, --ranks >= 2 and --rounds >= 1")
    return a


def in_flight_max(path):
    """Most gather-slot spans open over any compute span of rank 0 (the prefetch depth reached)."""
    sp = tu.spans(tu.load(path), 0)
    gathers = [(s[2], s[3]) for tid, v in sp.items() if tu.GATHER0 <= tid < tu.REDUCE0 for s in v]
    most = 0
    for name, cat, t0, t1 in sp.get(tu.COMPUTE, []):
        if cat == "compute":
            most = max(most, sum(1 for a, b in gathers if a < t1 and b > t0))
    return most


def main():
    a = parse()
    out = c.out_dir(a, NAME)
    work = out / "prefetch_depth"
    work.mkdir(parents=True, exist_ok=True)
    log = work / "run.log"
    log.write_text("")
    env = c.mpi_env(1)  # one thread per rank, as time_model_measure.py launches them
    env["OMPI_MCA_mpi_yield_when_idle"] = "1"
    data = str(c.REPO / "data" / "tinyshakespeare_byte" / "train_000000.bin")  # bench, train and memplan: vocab 257
    model = ["--config", a.config, "-B", str(a.B), "-T", str(a.T), "--train", data]
    rows = []
    for r in range(a.rounds):
        hw = work / f"round{r + 1}_N{a.ranks}.json"
        quick = ["--quick"] if a.quick else []
        rc, _, txt = c.run(c.launch(a, a.ranks, [a.gpt, "bench", "--calibrate", "--out", str(hw), *quick]), env,
                           a.timeout, log)
        if rc != 0:
            raise c.UserError(f"calibration failed: {txt.strip()[-300:]}")
        for K in a.slots[r % len(a.slots):] + a.slots[:r % len(a.slots)]:
            slots = ["--gather-slots", str(K)]
            mtrace, ptrace = work / f"measured_K{K}.json", work / f"predicted_K{K}.json"
            rc, _, txt = c.run(c.launch(a, a.ranks, [a.gpt, "bench", *model, *slots, "--steps", str(a.steps),
                                                      "--json"]), env, a.timeout, log)
            if rc != 0:
                raise c.UserError(f"gpt bench K={K} failed: {txt.strip()[-300:]}")
            meas = c.last_json(txt)
            if meas is None:
                raise c.UserError(f"gpt bench K={K} printed no JSON: {txt.strip()[-300:]}")
            rc, _, txt = c.run(c.launch(a, a.ranks, [a.gpt, "train", *model, *slots, "--steps", "2", "--tokenizer",
                                                      "none", "--lr", "1e-4", "--trace", str(mtrace)]), env, a.timeout,
                               log)
            if rc != 0:
                raise c.UserError(f"gpt train --trace K={K} failed: {txt.strip()[-300:]}")
            rc, _, txt = c.run([a.gpt, "memplan", *model, "--world", str(a.ranks), *slots, "--time", "--hardware",
                                str(hw), "--trace", str(ptrace), "--json"], env, a.timeout, log)
            if rc != 0:
                raise c.UserError(f"gpt memplan K={K} failed: {txt.strip()[-300:]}")
            pred = c.last_json(txt)
            if pred is None:
                raise c.UserError(f"gpt memplan K={K} printed no JSON: {txt.strip()[-300:]}")
            row = {"round": r + 1, "K": K, "gathers_in_flight_measured": in_flight_max(mtrace),
                   "gathers_in_flight_predicted": in_flight_max(ptrace),
                   "device_peak_measured": meas["peak_device_bytes"], "device_peak_predicted": pred["device_peak_bytes"],
                   "step_ms_measured": round(meas["ms_per_step"], 1), "step_ms_predicted": round(pred["time"]["step_ms"], 1)}
            rows.append(row)
            print(row, flush=True)
    with open(out / "prefetch_depth.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0].keys()))
        w.writeheader()
        w.writerows(rows)
    lines = [f"# --gather-slots K on {a.ranks} CPU ranks ({a.config}, -B {a.B} -T {a.T}), {a.rounds} interleaved rounds",
             "", "| K | gathers in flight (trace: measured / simulated) | device peak bytes (ledger / memplan) | "
             "step ms, median (measured / predicted) |", "|---|---|---|---|"]
    for K in a.slots:
        rs = [x for x in rows if x["K"] == K]
        lines.append(f"| {K} | {max(x['gathers_in_flight_measured'] for x in rs)} / "
                     f"{max(x['gathers_in_flight_predicted'] for x in rs)} | {rs[0]['device_peak_measured']} / "
                     f"{rs[0]['device_peak_predicted']} | {statistics.median(x['step_ms_measured'] for x in rs):.0f} / "
                     f"{statistics.median(x['step_ms_predicted'] for x in rs):.0f} |")
    (out / "prefetch_depth.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    c.main_guard(main)
