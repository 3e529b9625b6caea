#!/usr/bin/env python3
"""Behaviour kept across a change of the engine: runs the same training runs with two gpt binaries (before and
after) and requires the same bits: every step's loss and gradient norm (--metrics) and the final model file
(--out RUN/model.bin), on the cpu backend at 1 to 4 MPI ranks, over every strategy, offload, wrap, recompute
and gather-slot count; and the same memory and time plans (gpt memplan --json, with --time on an H100 file,
which runs the engine on the simulated machine, so its schedule is compared too).

  scripts/metrics/bit_identity.py --before OLD/gpt --after build/gpt [--quick]

Prints one line per case and a summary; exits 1 when any case differs.
"""
import argparse
import filecmp
import json
import os
import subprocess
import sys
import tempfile

MODEL = ["--n-layer", "3", "--n-head", "2", "--d-model", "64", "--seq-len", "32", "--vocab", "257",
         "--tokenizer", "none"]


def train_cases(quick):
    cases = []
    ranks = [1, 2] if quick else [1, 2, 3, 4]
    for n in ranks:
        for shard in ["full", "grad_op", "none", "hybrid"]:
            base = ["--shard", shard] + (["--shard-group", "2" if n % 2 == 0 else "1"] if shard == "hybrid" else [])
            cases.append((n, base))
            cases.append((n, base + ["--no-sync"]))
            cases.append((n, base + ["--reduce-dtype", "bf16"]))
            if quick:
                continue
            for off in ["optimizer", "params", "activations", "params,activations"]:
                cases.append((n, base + ["--offload", off]))
            cases.append((n, base + ["--wrap", "blocks:2", "--recompute", "full"]))
            cases.append((n, base + ["--recompute", "selective", "--gather-slots", "1"]))
            cases.append((n, base + ["--recompute", "every:2", "--gather-slots", "3", "--offload", "params"]))
    return cases


def plan_cases():
    out = []
    for shard in [["--shard", "full"], ["--shard", "grad_op"], ["--shard", "none"], ["--shard", "hybrid", "--shard-group", "8"]]:
        for extra in [[], ["--offload", "params"], ["--offload", "optimizer", "--no-sync"], ["--reduce-dtype", "bf16"],
                      ["--wrap", "blocks:4", "--recompute", "full", "--gather-slots", "3"]]:
            out.append(["--config", "d12", "--world", "16", "-B", "4", "-T", "1024", "--device", "cuda",
                        "--total-batch", str(2 * 4 * 1024 * 16)] + shard + extra)
    return out


def run_train(gpt, n, flags, data, workdir):
    out = os.path.join(workdir, "run")
    metrics = os.path.join(workdir, "metrics.jsonl")
    cmd = [gpt, "train"] + MODEL + ["--train", data + "/train_*.bin", "-B", "2", "-T", "32", "--steps", "6",
                                    "--total-batch", str(2 * 32 * 2 * 12), "--out", out, "--metrics", metrics,
                                    "--device", "cpu", "--quiet", "--seed", "7", "--lr", "1e-3"] + flags
    if n > 1:
        cmd = ["mpirun", "-n", str(n), "--oversubscribe", "-x", "OMP_NUM_THREADS=1", "-x", "OPENBLAS_NUM_THREADS=1"] + cmd
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1", OMP_NUM_THREADS="1")
    r = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if r.returncode != 0:
        return None, r.stderr.strip().splitlines()[-1:] or ["exit %d" % r.returncode]
    steps = [json.loads(l) for l in open(metrics)]
    return ([(s["step"], s["loss"], s["grad_norm"]) for s in steps], os.path.join(out, "model.bin")), None


def covers(before, after):
    """Every value the before-plan has, the after-plan has too (the after binary may report more fields)."""
    if isinstance(before, dict):
        return isinstance(after, dict) and all(k in after and covers(v, after[k]) for k, v in before.items())
    return before == after


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--before", required=True)
    ap.add_argument("--after", required=True)
    ap.add_argument("--data", default="", help="byte-tokenized shards (default: made from data/tinyshakespeare)")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--plans-only", action="store_true", help="only the memory and time plans")
    ap.add_argument("--before-hardware", default="",
                    help="the H100 file the before binary reads (default data/hardware/h100.json): an older binary "
                         "refuses fields added since, e.g. git show REV:data/hardware/h100.json > FILE")
    a = ap.parse_args()
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    tmp = tempfile.mkdtemp(prefix="bit_identity_")
    data = a.data
    if not data:
        data = os.path.join(tmp, "data")
        subprocess.run([a.after, "tokenize", "--tokenizer", "byte", "--input",
                        os.path.join(root, "data/tinyshakespeare/input.txt"), "--out", data], check=True,
                       capture_output=True)
    failed = 0
    cases = [] if a.plans_only else train_cases(a.quick)
    for i, (n, flags) in enumerate(cases):
        res = []
        for tag, gpt in (("before", a.before), ("after", a.after)):
            wd = os.path.join(tmp, f"c{i}_{tag}")
            os.makedirs(wd)
            res.append(run_train(gpt, n, flags, data, wd))
        (b, berr), (c, cerr) = res
        if berr or cerr:
            same = berr == cerr
            verdict = "same error" if same else f"error: before {berr}, after {cerr}"
        else:
            same = b[0] == c[0] and filecmp.cmp(b[1], c[1], shallow=False)
            verdict = "bit-identical" if same else "DIFFERS"
        failed += not same
        print(f"train n={n} {' '.join(flags):60s} {verdict}", flush=True)
    here = os.path.join(root, "data/hardware/h100.json")
    for flags in plan_cases():
        outs = []
        for gpt, hw in ((a.before, a.before_hardware or here), (a.after, here)):
            r = subprocess.run([gpt, "memplan", "--json", "--time", "--hardware", hw] + flags, capture_output=True,
                               text=True)
            plan = json.loads(r.stdout) if r.returncode == 0 else r.stderr
            if isinstance(plan, dict):
                plan.get("time", {}).pop("plan_ms", None)  # how long planning took, not what it planned
                for k in ("hardware_file", "network"):  # the file's path and its description, not the plan
                    plan.get("time", {}).pop(k, None)
            outs.append((r.returncode, plan))
        same = outs[0][0] == outs[1][0] and covers(outs[0][1], outs[1][1])
        failed += not same
        print(f"memplan --time {' '.join(flags[6:]):60s} {'identical' if same else 'DIFFERS'}", flush=True)
    print(f"{failed} of {len(cases) + len(plan_cases())} cases differ")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
