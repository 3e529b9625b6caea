#!/usr/bin/python3
"""PyTorch peer for `gpt bench --adamw N`: one torch.optim.AdamW step over N fp32 parameters on the CPU.

Why: the host optimizer of `--offload optimizer` must be fast; this times PyTorch's AdamW on the same number of
parameters (shaped like GPT-2 124M's tensors when N is 124M: wte, wpe and 12 blocks), so the ratio can be
measured in the same run. Run with Debian's torch: /usr/bin/python3 scripts/bench_adamw.py [--params N] [--json]
"""
import argparse
import os
import json
import statistics
import time

import torch


def tensors_for(n):
    """GPT-2-like shapes adding up to about n parameters (768 channels)."""
    C = 768
    shapes = [(50304, C), (1024, C)]
    per_block = [(C,), (C,), (3 * C, C), (3 * C,), (C, C), (C,), (C,), (C,), (4 * C, C), (4 * C,), (C, 4 * C), (C,)]
    total = sum(a * b for a, b in shapes)
    while total < n:
        for s in per_block:
            shapes.append(s)
            total += s[0] * (s[1] if len(s) > 1 else 1)
    return [torch.zeros(s) + 0.01 for s in shapes]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--params", type=int, default=124_000_000)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    if a.params < 1000 or a.reps < 1:
        ap.error("--params >= 1000 and --reps >= 1")
    torch.set_num_threads(os.cpu_count())
    params = [torch.nn.Parameter(t) for t in tensors_for(a.params)]
    for p in params:
        p.grad = torch.full_like(p, 0.001)
    opt = torch.optim.AdamW(params, lr=1e-4, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.1)
    opt.step()  # warm-up: allocates the state
    times = []
    for _ in range(a.reps):
        t0 = time.perf_counter()
        opt.step()
        times.append(time.perf_counter() - t0)
    n = sum(p.numel() for p in params)
    res = {"framework": f"pytorch {torch.__version__}", "threads": torch.get_num_threads(), "adamw_params": n,
           "adamw_ms": statistics.median(times) * 1e3}
    print(json.dumps(res) if a.json else f"torch AdamW over {n} params: {res['adamw_ms']:.1f} ms ({res['threads']} threads)")


if __name__ == "__main__":
    main()
