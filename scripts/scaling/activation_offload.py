#!/usr/bin/python3
"""--offload activations under --recompute full, with and without, measured on N CPU ranks and predicted:
device and host peak bytes (the ledger of gpt bench against gpt memplan), the step-time ratio (gpt bench in
interleaved rounds, against gpt memplan --time on a calibration of this machine made in the same round), and
the time model's prediction of the same pair on a GPU hardware file for a realistic batch.

  scripts/scaling/activation_offload.py [--config d12] [--ranks 1,2] [-B 4 -T 64] [--rounds 2]
      [--gpu-hardware data/hardware/h100.json --gpu-world 1,8 --gpu-B 16 --gpu-T 1024] [--out DIR] [--quick]
Writes OUT/activation_offload.csv (CPU runs), OUT/activation_offload_gpu.csv (predictions) and
OUT/activation_offload.md (run log and hardware files in OUT/work/).
"""
import statistics
from pathlib import Path

import common as c

NAME = "activation_offload"
OFFLOADS = ("none", "activations")


def parse():
    p = c.base_parser(NAME, __doc__.splitlines()[0])
    p.add_argument("--config", default="d12")
    p.add_argument("--ranks", default="1,2")
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--steps", type=int, default=3, help="timed steps per gpt bench (after its warm-up step)")
    p.add_argument("-B", type=int, default=4)
    p.add_argument("-T", type=int, default=64)
    p.add_argument("--gpu-hardware", default="data/hardware/h100.json")
    p.add_argument("--gpu-world", default="1,8")
    p.add_argument("--gpu-B", type=int, default=16)
    p.add_argument("--gpu-T", type=int, default=1024)
    a = p.parse_args()
    if a.quick:  # d2, 1 and 2 ranks, one round, a quick calibration: well under a minute
        a.config, a.rounds, a.steps = "d2", 1, 2
    a.gpt = c.check_gpt(a.gpt)
    c.family_shape(a.config)
    a.ranks = c.int_list(a.ranks, "--ranks", 1, c.MAX_RANKS)
    a.gpu_world = c.int_list(a.gpu_world, "--gpu-world", 1, 1 << 16)
    c.check_ranks(a.ranks, "--ranks", c.MAX_RANKS, a.mpiexec)
    if a.rounds < 1 or a.steps < 1 or min(a.B, a.T, a.gpu_B, a.gpu_T) < 1:
        raise c.UserError("--rounds, --steps, -B, -T, --gpu-B and --gpu-T must be >= 1")
    hw = Path(a.gpu_hardware)
    hw = hw if hw.is_absolute() or hw.is_file() else c.REPO / hw
    if not hw.is_file():
        raise c.UserError(f"--gpu-hardware {a.gpu_hardware}: no such file (see data/hardware/)")
    a.gpu_hardware = hw
    return a


def memplan_time(a, argv, env, log, what):
    rc, _, txt = c.run([a.gpt, "memplan", *argv, "--json"], env, a.timeout, log)
    j = c.last_json(txt) if rc == 0 else None
    if j is None:
        raise c.UserError(f"gpt memplan ({what}) failed: {txt.strip()[-300:]}")
    return j


def gpu_rows(a, env, log):
    """The time model's pair on the GPU file, at --recompute full (the measured setting) and none (where
    everything a block keeps crosses PCIe)."""
    rows = []
    for rec in ("full", "none"):
        for w in a.gpu_world:
            base = None
            for off in OFFLOADS:
                j = memplan_time(a, ["--device", "cuda", "--config", a.config, "-B", str(a.gpu_B), "-T", str(a.gpu_T),
                                     "--world", str(w), "--recompute", rec, "--offload", off, "--time", "--hardware",
                                     str(a.gpu_hardware)], env, log, f"{a.gpu_hardware.name} N={w} {rec} {off}")
                t = j["time"]
                base = base or t["step_ms"]
                rows.append({"hardware": a.gpu_hardware.name, "config": a.config, "B": a.gpu_B, "T": a.gpu_T,
                             "world": w, "recompute": rec, "offload": off, "attention": j["attention"],
                             "device_peak_bytes": j["device_peak_bytes"], "host_peak_bytes": j["host_peak_bytes"],
                             "activation_device_bytes": j["device_bytes"]["activation"],
                             "activation_host_bytes": j["host_bytes"]["activation"],
                             "step_ms": round(t["step_ms"], 3), "copies_ms": round(t["phases_ms"]["copies"], 3),
                             "tokens_per_s": round(t["tokens_per_s"], 1), "step_ratio": round(t["step_ms"] / base, 4)})
    return rows


def main():
    a = parse()
    out = c.out_dir(a, NAME)
    work = out / "work"
    work.mkdir(parents=True, exist_ok=True)
    log = work / "run.log"
    log.write_text("")
    env = c.mpi_env(1)
    env["OMPI_MCA_mpi_yield_when_idle"] = "1"
    env["GPT_CACHE_DIR"] = str(work / "cache")  # the calibration's MFU peak stays here, not in the user's cache
    shard = str(c.REPO / "data" / "tinyshakespeare_byte" / "train_000000.bin")  # vocab 257
    model = ["--config", a.config, "-B", str(a.B), "-T", str(a.T), "--train", shard, "--recompute", "full"]
    rows = []
    for r in range(a.rounds):
        for n in a.ranks:
            hw = work / f"round{r + 1}_N{n}.json"
            c.progress(f"round {r + 1}: calibrating {n} rank(s) into {hw.name}")
            rc, _, txt = c.run(c.launch(a, n, [a.gpt, "bench", "--calibrate", "--out", str(hw),
                                               *(["--quick"] if a.quick else [])]), env, a.timeout, log)
            if rc != 0:
                raise c.UserError(f"calibration at {n} rank(s) failed: {txt.strip()[-300:]}")
            order = OFFLOADS if r % 2 == 0 else OFFLOADS[::-1]  # alternate which goes first
            for off in order:
                rc, _, txt = c.run(c.launch(a, n, [a.gpt, "bench", *model, "--offload", off, "--steps", str(a.steps),
                                                   "--json"]), env, a.timeout, log)
                meas = c.last_json(txt) if rc == 0 else None
                if meas is None:
                    raise c.UserError(f"gpt bench N={n} --offload {off} failed: {txt.strip()[-300:]}")
                pred = memplan_time(a, [*model, "--world", str(n), "--offload", off, "--time", "--hardware", str(hw)],
                                    env, log, f"N={n} {off}")
                row = {"round": r + 1, "ranks": n, "offload": off,
                       "device_peak_measured": meas["peak_device_bytes"], "device_peak_memplan": pred["device_peak_bytes"],
                       "host_peak_measured": meas["peak_host_bytes"], "host_peak_memplan": pred["host_peak_bytes"],
                       "activation_device_memplan": pred["device_bytes"]["activation"],
                       "activation_host_memplan": pred["host_bytes"]["activation"],
                       "step_ms_measured": round(meas["ms_per_step"], 1), "step_ms_predicted": round(pred["time"]["step_ms"], 1),
                       "copies_ms_predicted": round(pred["time"]["phases_ms"]["copies"], 2)}
                rows.append(row)
                c.progress(str(row))
    c.write_csv(out / "activation_offload.csv", rows, list(rows[0].keys()))
    grows = gpu_rows(a, env, log)
    c.write_csv(out / "activation_offload_gpu.csv", grows, list(grows[0].keys()))

    def pick(n, off, r=None):
        return [x for x in rows if x["ranks"] == n and x["offload"] == off and (r is None or x["round"] == r)]

    lines = [f"# --offload activations under --recompute full: {a.config}, -B {a.B} -T {a.T}, on CPU ranks, "
             f"{a.rounds} interleaved round(s)", "",
             "Per rank. Peaks: `gpt bench`'s ledger (measured) / `gpt memplan` (on CPU ranks the \"device\" is host "
             "memory too: the offloaded inputs move to a second, pinned-host ledger domain). Step ms: median over "
             "rounds; the ratio is offload / none per round, its median (measured: `gpt bench`; predicted: "
             "`gpt memplan --time` on that round's calibration).", "",
             "| ranks | offload | device peak MiB (meas / memplan) | host peak MiB (meas / memplan) | "
             "step ms (meas / pred) | step ratio (meas / pred) |", "|---|---|---|---|---|---|"]
    for n in a.ranks:
        for off in OFFLOADS:
            rs = pick(n, off)
            f = rs[0]
            ratios_m, ratios_p = [], []
            for r in range(1, a.rounds + 1):
                b, o = pick(n, "none", r)[0], pick(n, off, r)[0]
                ratios_m.append(o["step_ms_measured"] / b["step_ms_measured"])
                ratios_p.append(o["step_ms_predicted"] / b["step_ms_predicted"])
            lines.append(f"| {n} | {off} | {c.mib(f['device_peak_measured'])} / {c.mib(f['device_peak_memplan'])} | "
                         f"{c.mib(f['host_peak_measured'])} / {c.mib(f['host_peak_memplan'])} | "
                         f"{statistics.median(x['step_ms_measured'] for x in rs):.0f} / "
                         f"{statistics.median(x['step_ms_predicted'] for x in rs):.0f} | "
                         f"{statistics.median(ratios_m):.3f} / {statistics.median(ratios_p):.3f} |")
    lines += ["", "Every run (step ms measured / predicted):", "", "| round | " +
              " | ".join(f"N={n} {off}" for n in a.ranks for off in OFFLOADS) + " |",
              "|---|" + "---|" * (len(a.ranks) * len(OFFLOADS))]
    for r in range(1, a.rounds + 1):
        lines.append(f"| {r} | " + " | ".join(f"{pick(n, off, r)[0]['step_ms_measured']:.0f} / "
                                               f"{pick(n, off, r)[0]['step_ms_predicted']:.0f}"
                                               for n in a.ranks for off in OFFLOADS) + " |")
    g0 = grows[0]
    lines += ["", f"## Predicted on {g0['hardware']}: {a.config}, -B {a.gpu_B} -T {a.gpu_T}, `--device cuda` "
              f"(attention {g0['attention']})", "",
              "| GPUs | recompute | offload | device peak GiB | host peak GiB | step ms | copies on the critical path ms | "
              "tokens/s | step ratio |", "|---|---|---|---|---|---|---|---|---|"]
    for g in grows:
        lines.append(f"| {g['world']} | {g['recompute']} | {g['offload']} | {g['device_peak_bytes'] / 2**30:.3f} | "
                     f"{g['host_peak_bytes'] / 2**30:.3f} | {g['step_ms']:.2f} | {g['copies_ms']:.2f} | "
                     f"{g['tokens_per_s']:.0f} | {g['step_ratio']:.3f} |")
    lines += ["", f"Command: `{c.command_line()}`"]
    (out / "activation_offload.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    print(f"wrote {out / 'activation_offload.csv'}, {out / 'activation_offload_gpu.csv'} and "
          f"{out / 'activation_offload.md'}")


if __name__ == "__main__":
    c.main_guard(main)
