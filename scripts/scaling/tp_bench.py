#!/usr/bin/env python3
"""Tensor parallelism against data parallelism on the same ranks and the same global batch: gpt bench of
--tp R (one data-parallel rank, micro-batch B*R) and of plain FSDP (R data-parallel ranks, micro-batch B),
alternated round by round so that both see the machine's drift alike; prints each one's median step time,
tokens/s and device peak, and the median of the per-round ratios TP/DP.

  scripts/scaling/tp_bench.py --gpt build/gpt [--ranks 2] [--config d6] [-B 4] [-T 128] [--steps 6] [--rounds 5]

On CPU ranks tensor parallelism is for studying the mechanics, not speed: its products are the same size in
sum, its collectives are on the critical path (MPI without a progress thread overlaps nothing), and what it
saves is memory (each rank holds 1/R of every block and of the logits).
"""
import argparse
import json
import os
import statistics
import subprocess


def bench(gpt, ranks, extra, args):
    cmd = ["mpirun", "-n", str(ranks), "--oversubscribe", "-x", "OMP_NUM_THREADS=1", "-x", "OPENBLAS_NUM_THREADS=1",
           gpt, "bench", "--config", args.config, "-T", str(args.T), "--steps", str(args.steps), "--json"] + extra
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    out = subprocess.run(cmd, capture_output=True, text=True, env=env, check=True).stdout
    return json.loads([l for l in out.splitlines() if l.startswith("{")][-1])


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--gpt", default="build/gpt")
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--config", default="d6")
    ap.add_argument("-B", type=int, default=4)
    ap.add_argument("-T", type=int, default=128)
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--rounds", type=int, default=5)
    a = ap.parse_args()
    tp, dp, ratios = [], [], []
    for r in range(a.rounds):
        t = bench(a.gpt, a.ranks, ["-B", str(a.B * a.ranks), "--tp", str(a.ranks)], a)
        d = bench(a.gpt, a.ranks, ["-B", str(a.B)], a)
        tp.append(t)
        dp.append(d)
        ratios.append(t["ms_per_step"] / d["ms_per_step"])
        print(f"round {r + 1}: tp {t['ms_per_step']:.1f} ms, dp {d['ms_per_step']:.1f} ms, ratio {ratios[-1]:.3f}",
              flush=True)
    for name, runs in (("tp", tp), ("dp", dp)):
        ms = statistics.median(x["ms_per_step"] for x in runs)
        tok = statistics.median(x["tokens_per_s"] for x in runs)
        peak = runs[0]["peak_device_mib"]
        print(f"{name}: median {ms:.1f} ms/step, {tok:.0f} tokens/s, device peak {peak:.1f} MiB per rank")
    print(f"tp/dp step time: median ratio {statistics.median(ratios):.3f} (min {min(ratios):.3f}, max {max(ratios):.3f})"
          f" over {a.rounds} alternated rounds")


if __name__ == "__main__":
    main()
