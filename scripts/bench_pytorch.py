#!/usr/bin/python3
"""PyTorch peer for `gpt bench`: times one GPT-2 training step (forward + backward + grad clip + AdamW) on CPU.

Why: a speed number means little alone; this gives the same model, batch and optimizer in plain float32 PyTorch
on the same machine, so `gpt bench` can be read against it. The model is written the ordinary way (nn.Linear,
nn.LayerNorm, tied embedding, attention by hand with a causal mask: torch 1.13 has no fused attention), the
logits cover all Vp columns and the loss's softmax the first V. Weights are N(0, 0.02); the batch is random
tokens, the same every step.

Run with Debian's torch:  /usr/bin/python3 scripts/bench_pytorch.py --config d12 -B 4 -T 64 --steps 5 [--json]
Output: a few description lines, then `ms_per_step <median>` and `tokens_per_s <x>` as the last two lines; with
--json one JSON object instead. Timing uses the median over --steps steps after --warmup untimed ones.
"""
import argparse
import json
import math
import os
import statistics
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

# name -> (L, NH, C); vocab 50257 padded to 50304, maxT 1024, as gpt's presets.
PRESETS = {"d2": (2, 2, 128), "d4": (4, 4, 256), "d6": (6, 6, 384), "d12": (12, 12, 768)}


class Block(nn.Module):
    def __init__(self, C, NH):
        super().__init__()
        self.NH = NH
        self.ln1, self.ln2 = nn.LayerNorm(C, eps=1e-5), nn.LayerNorm(C, eps=1e-5)
        self.qkv, self.attproj = nn.Linear(C, 3 * C), nn.Linear(C, C)
        self.fc, self.fcproj = nn.Linear(C, 4 * C), nn.Linear(4 * C, C)

    def attn(self, x):
        B, T, C = x.shape
        hs = C // self.NH
        q, k, v = self.qkv(x).split(C, dim=-1)  # each (B, T, C)
        q = q.view(B, T, self.NH, hs).transpose(1, 2)  # (B, NH, T, hs)
        k = k.view(B, T, self.NH, hs).transpose(1, 2)
        v = v.view(B, T, self.NH, hs).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(hs))  # (B, NH, T, T)
        causal = torch.ones(T, T, dtype=torch.bool, device=x.device).tril()
        att = att.masked_fill(~causal, float("-inf")).softmax(dim=-1)
        return self.attproj((att @ v).transpose(1, 2).reshape(B, T, C))

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.fcproj(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))


class GPT(nn.Module):
    def __init__(self, L, NH, C, V, Vp, maxT):
        super().__init__()
        self.V = V
        self.wte, self.wpe = nn.Embedding(Vp, C), nn.Embedding(maxT, C)  # (Vp, C), (maxT, C)
        self.blocks = nn.ModuleList([Block(C, NH) for _ in range(L)])
        self.lnf = nn.LayerNorm(C, eps=1e-5)
        for name, p in self.named_parameters():
            if p.dim() == 2:
                std = 0.02 / math.sqrt(2 * L) if name.endswith("proj.weight") else 0.02
                nn.init.normal_(p, 0.0, std)

    def forward(self, idx, targets):
        T = idx.shape[1]
        x = self.wte(idx) + self.wpe(torch.arange(T, device=idx.device))  # (B, T, C)
        for blk in self.blocks:
            x = blk(x)
        logits = self.lnf(x) @ self.wte.weight.t()  # (B, T, Vp)
        return F.cross_entropy(logits[..., : self.V].reshape(-1, self.V), targets.reshape(-1))


def parse_args():
    ap = argparse.ArgumentParser(description="PyTorch CPU peer for gpt bench")
    ap.add_argument("--config", default="d12", help="preset: " + " ".join(PRESETS))
    ap.add_argument("-L", type=int, help="layers (overrides the preset)")
    ap.add_argument("--NH", type=int, help="heads (overrides the preset)")
    ap.add_argument("-C", type=int, help="channels (overrides the preset)")
    ap.add_argument("-V", type=int, default=50257, help="vocabulary; padded up to a multiple of 128")
    ap.add_argument("--maxT", type=int, default=1024, help="position-embedding rows")
    ap.add_argument("-B", type=int, default=4, help="micro-batch")
    ap.add_argument("-T", type=int, default=64, help="sequence length")
    ap.add_argument("--steps", type=int, default=5, help="timed steps")
    ap.add_argument("--warmup", type=int, default=1, help="untimed steps first")
    ap.add_argument("--lr", type=float, default=3e-4)
    ap.add_argument("--weight-decay", type=float, default=0.1)
    ap.add_argument("--grad-clip", type=float, default=1.0, help="0 disables")
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--json", action="store_true", help="print one JSON object instead of text")
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"],
                    help="cuda: the GPU peer, bf16 autocast with fp32 master weights (like gpt's cuda backend)")
    a = ap.parse_args()
    if a.config not in PRESETS:
        ap.error(f"--config {a.config}: expected one of {' '.join(PRESETS)}")
    L, NH, C = PRESETS[a.config]
    a.L, a.NH, a.C = a.L or L, a.NH or NH, a.C or C
    if a.C % a.NH or a.T > a.maxT or a.steps < 1:
        ap.error("need C divisible by NH, T <= maxT and --steps >= 1")
    a.Vp = (a.V + 127) // 128 * 128
    return a


def main():
    a = parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    if a.device == "cuda" and not torch.cuda.is_available():
        raise SystemExit("error: --device cuda: no CUDA GPU visible to torch")
    dev = torch.device(a.device)
    model = GPT(a.L, a.NH, a.C, a.V, a.Vp, a.maxT).to(dev)
    decay = [p for p in model.parameters() if p.dim() == 2]
    rest = [p for p in model.parameters() if p.dim() != 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": a.weight_decay},
                             {"params": rest, "weight_decay": 0.0}], lr=a.lr, betas=(0.9, 0.95), eps=1e-8)
    idx = torch.randint(0, a.V, (a.B, a.T), device=dev)
    tgt = torch.randint(0, a.V, (a.B, a.T), device=dev)
    sync = torch.cuda.synchronize if a.device == "cuda" else (lambda: None)
    autocast = (lambda: torch.autocast("cuda", dtype=torch.bfloat16)) if a.device == "cuda" else None

    times, loss = [], float("nan")
    for i in range(a.warmup + a.steps):
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        if autocast:
            with autocast():
                out = model(idx, tgt)
        else:
            out = model(idx, tgt)
        out.backward()
        if a.grad_clip > 0:
            torch.nn.utils.clip_grad_norm_(model.parameters(), a.grad_clip)
        opt.step()
        sync()
        dt = time.perf_counter() - t0
        loss = out.item()
        if i >= a.warmup:
            times.append(dt)

    n_params = sum(p.numel() for p in model.parameters())
    tokens = a.B * a.T
    flops = (6 * n_params + 12 * a.L * a.C * a.T) * tokens  # nanoGPT/PaLM estimate per step
    med = statistics.median(times)
    res = {"framework": f"pytorch {torch.__version__}", "device": a.device, "config": a.config, "L": a.L, "NH": a.NH, "C": a.C,
           "V": a.V, "Vp": a.Vp, "maxT": a.maxT, "B": a.B, "T": a.T, "threads": torch.get_num_threads(),
           "params": n_params, "steps": a.steps, "warmup": a.warmup, "loss": loss,
           "ms_per_step": med * 1e3, "ms_min": min(times) * 1e3, "ms_max": max(times) * 1e3,
           "tokens_per_s": tokens / med, "gflops_per_s": flops / med / 1e9}
    if a.json:
        print(json.dumps(res))
        return
    print(f"pytorch {torch.__version__} cpu threads {res['threads']}  {a.config} L{a.L} NH{a.NH} C{a.C} "
          f"Vp{a.Vp} params {n_params / 1e6:.2f}M  B{a.B} T{a.T}")
    print(f"steps {a.steps} (+{a.warmup} warmup) ms min {res['ms_min']:.1f} max {res['ms_max']:.1f} "
          f"loss {loss:.4f} gflops_per_s {res['gflops_per_s']:.1f}")
    print(f"ms_per_step {res['ms_per_step']:.3f}")
    print(f"tokens_per_s {res['tokens_per_s']:.1f}")


if __name__ == "__main__":
    main()
