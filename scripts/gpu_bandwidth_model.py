#!/usr/bin/env python3
"""A bandwidth model of one training step of gpt on one GPU: d12 (GPT-2 124M), B=16, T=1024, one micro-step
per step, world size 1, on an H200 (4.8 TB/s HBM, 989 TFLOP/s dense bf16).

For every kernel of the step it counts the bytes moved through device memory (each input read once, each
output written once, unless the kernel is known to read something twice) and, for matrix products, the
floating-point operations; then it predicts the kernel's time as

    memory-bound kernel:  bytes / (eta * 4.8 TB/s)
    matrix product:       max(flops / (eta_gemm * 989 TFLOP/s), bytes / (eta_after * 4.8 TB/s))

and sums the kernels (no overlap, no launch gaps: launches are asynchronous and the step has no host waits
after this work, except where noted). MFU = the model's FLOPs per step (the trainer's formula: 6 n + 12 L C T
per token, n = parameters without wpe) / (predicted step time * 989 TFLOP/s).

BEFORE is the first CUDA backend's kernels: 2-byte scalar accesses in every memory-bound kernel, residual and
layernorm apart, layernorm backward in three kernels plus a residual add, GELU backward as its own pass, a
forward-only classifier pass (and a host wait) in forward plus a two-read classifier pass in backward, the
embedding gradient through fp32 atomics. Its attention is either of its paths: `simple` (the default: (T, T)
score and probability matrices in memory) or `fused` (the project's flash-style WMMA kernels).
AFTER is the current kernels (16-byte accesses, the fusions, one classifier pass, deterministic embedding
backward) with attention on a flash / cuDNN path, modelled as flash attention's traffic: Q, K, V read and O
written once per layer plus the row log-sum-exp; backward reads Q, K, V, O, dO once, writes dQ, dK, dV once
(and the dO.O row sums).

Efficiencies (assumptions, stated once here; --eta-before etc. change them):
  eta_after  = 0.85  16-byte accesses: a device-to-device copy measured 4.3 TB/s = 0.90 of 4.8 on this
                     workplace's H200 (KINDS.md); a streaming kernel with 16-byte accesses gets close to it.
  eta_before = 0.40  2-byte scalar accesses in grid-stride loops: one 2-byte load in flight per thread per
                     iteration, about 4 KB in flight per SM against the ~30 KB Little's law asks for at
                     4.8 TB/s and ~0.8 us latency; the kernels are latency-bound well below the copy rate.
  eta_gemm   = 0.75  cuBLASLt bf16 products: 790 TFLOP/s = 0.80 of 989 was measured on 8192^3 (KINDS.md);
                     these products are smaller (K = 768 or 3072).
  eta_flash  = 0.50  cuDNN / flash attention, head size 64, causal (FlashAttention-2 reaches ~50% on H100).
  eta_wmma   = 0.25  the project's own WMMA flash kernels (no wgmma, no TMA; an assumption, not a measurement).
  eta_batched= 0.50  the simple path: batched 1024 x 1024 x 64 products.
No step of gpt was measured on a GPU: the step times are arithmetic to be set against a GPU run
(scripts/gpu_check.sh).

Usage: scripts/gpu_bandwidth_model.py [--eta-before X] [--eta-after X] [--eta-gemm X] [--eta-flash X] [--B 16]
       [--T 1024]    (prints markdown tables: docs/gpu_bandwidth_model.md is this output with its reading)
"""
import argparse
import math
from types import SimpleNamespace

HBM = 4.8e12
PEAK = 989e12


def dims(B, T, L, C, NH, V, Vp, maxT):
    """The sizes every row is written in (elements, bytes per element, parameter counts, FLOPs)."""
    N = B * T
    hs = C // NH
    E = N * C          # elements of one (N, C) activation
    bf, f4 = 2, 4
    Z = N * Vp         # logits elements
    BHTT = B * NH * T * T
    BHT = B * NH * T
    G = 2 * B * NH * T * T * hs  # flops of one full (T, T, hs) product over all heads
    blk = 12 * C * C + 13 * C
    psi = Vp * C + maxT * C + L * blk + 2 * C           # parameters (padded vocabulary)
    n_model = psi - maxT * C  # the trainer's flops_per_token counts the parameters without wpe
    model_flops = (6 * n_model + 12 * L * C * T) * N
    psi_gathered = (Vp * C + maxT * C) + 2 * L * blk + 2 * 2 * C  # embed once, blocks and head twice
    return SimpleNamespace(**{k: v for k, v in locals().items()})


class Rows:
    """The kernel rows of one step: (group, name, count, before, after), where before and after are
    (bytes, flops, eta_mem, eta_flop) or None (the kernel does not exist on that side)."""

    def __init__(self, eta_before, eta_after, eta_gemm):
        self.rows, self.eb, self.ea, self.eta_gemm = [], eta_before, eta_after, eta_gemm

    def mem(self, b, eta):
        return (b, 0, eta, None)

    def gemm(self, b, flops, eta=None):
        return (b, flops, self.ea, self.eta_gemm if eta is None else eta)

    def add(self, group, name, count, before, after):
        self.rows.append((group, name, count, before, after))


def forward_rows(r, d):
    """The forward pass, before and after."""
    mem, gemm, add, eb, ea = r.mem, r.gemm, r.add, r.eb, r.ea
    T, L, C, Vp, N, E, bf, f4, Z = d.T, d.L, d.C, d.Vp, d.N, d.E, d.bf, d.f4, d.Z
    # ---------------- forward ----------------
    add("forward", "encoder (wte rows + wpe)", 1, mem(bf * (2 * E + T * C), eb), mem(bf * (2 * E + T * C), ea))
    add("forward", "layernorm ln1", L, mem(bf * 2 * E + 8 * N, eb), mem(bf * 2 * E + 8 * N, ea))
    add("forward", "GEMM qkv (+bias epilogue)", L, gemm(bf * (E + 3 * C * C + 3 * E), 2 * N * C * 3 * C),
        gemm(bf * (E + 3 * C * C + 3 * E), 2 * N * C * 3 * C))
    add("forward", "attention forward (see attention rows)", L, None, None)
    add("forward", "GEMM attproj (+bias)", L, gemm(bf * (2 * E + C * C), 2 * N * C * C),
        gemm(bf * (2 * E + C * C), 2 * N * C * C))
    add("forward", "residual add res2", L, mem(bf * 3 * E, eb), None)
    add("forward", "layernorm ln2", L, mem(bf * 2 * E + 8 * N, eb), None)
    add("forward", "residual add + ln2 (fused)", L, None, mem(bf * 4 * E + 8 * N, ea))
    add("forward", "GEMM fc + GELU epilogue (pre and gelu out)", L, gemm(bf * (E + 4 * C * C + 8 * E), 2 * N * C * 4 * C),
        gemm(bf * (E + 4 * C * C + 8 * E), 2 * N * C * 4 * C))
    add("forward", "GEMM fcproj (+bias)", L, gemm(bf * (4 * E + 4 * C * C + E), 2 * N * 4 * C * C),
        gemm(bf * (4 * E + 4 * C * C + E), 2 * N * 4 * C * C))
    add("forward", "residual add (block output)", L, mem(bf * 3 * E, eb), mem(bf * 3 * E, ea))
    add("forward", "layernorm lnf", 1, mem(bf * 2 * E + 8 * N, eb), mem(bf * 2 * E + 8 * N, ea))
    add("forward", "GEMM lm_head (logits)", 1, gemm(bf * (E + Vp * C + Z), 2 * N * C * Vp),
        gemm(bf * (E + Vp * C + Z), 2 * N * C * Vp))
    add("forward", "classifier forward-only pass (+ host wait)", 1, mem(bf * Z + f4 * N, eb), None)


def backward_rows(r, d):
    """The backward pass, before and after."""
    mem, gemm, add, eb, ea = r.mem, r.gemm, r.add, r.eb, r.ea
    T, L, C, V, Vp, N, E, bf, f4, Z = d.T, d.L, d.C, d.V, d.Vp, d.N, d.E, d.bf, d.f4, d.Z
    # ---------------- backward ----------------
    add("backward", "classifier loss+dlogits (before: 2 reads + 1 write)", 1, mem(bf * 3 * Z + f4 * N, eb),
        mem(bf * 2 * Z + f4 * N, ea))
    add("backward", "GEMM lm_head dinp", 1, gemm(bf * (Z + Vp * C + E), 2 * N * Vp * C), gemm(bf * (Z + Vp * C + E), 2 * N * Vp * C))
    add("backward", "GEMM lm_head dwte (fp32 +=)", 1, gemm(bf * (Z + E) + 8 * Vp * C, 2 * N * Vp * C),
        gemm(bf * (Z + E) + 8 * Vp * C, 2 * N * Vp * C))
    add("backward", "layernorm lnf backward (before: 3 kernels)", 1, mem(bf * (3 * E + 2 * E), eb),
        mem(bf * 3 * E + 8 * 128 * 2 * C, ea))
    add("backward", "GEMM fcproj dinp (after: + DGELU epilogue)", L, gemm(bf * (E + 4 * C * C + 4 * E), 2 * N * C * 4 * C),
        gemm(bf * (E + 4 * C * C + 4 * E + 4 * E), 2 * N * C * 4 * C))
    add("backward", "GEMM fcproj dw", L, gemm(bf * (E + 4 * E) + 8 * 4 * C * C, 2 * N * C * 4 * C),
        gemm(bf * (E + 4 * E) + 8 * 4 * C * C, 2 * N * C * 4 * C))
    add("backward", "bias grad fcproj (column sums of dres)", L, mem(bf * E, eb), mem(bf * E, ea))
    add("backward", "GELU backward pass", L, mem(bf * 12 * E, eb), None)
    add("backward", "GEMM fc dinp", L, gemm(bf * (4 * E + 4 * C * C + E), 2 * N * 4 * C * C),
        gemm(bf * (4 * E + 4 * C * C + E), 2 * N * 4 * C * C))
    add("backward", "GEMM fc dw", L, gemm(bf * (4 * E + E) + 8 * 4 * C * C, 2 * N * 4 * C * C),
        gemm(bf * (4 * E + E) + 8 * 4 * C * C, 2 * N * 4 * C * C))
    add("backward", "bias grad fc (column sums of dfch)", L, mem(bf * 4 * E, eb), mem(bf * 4 * E, ea))
    add("backward", "layernorm ln2 backward (before: 3 kernels)", L, mem(bf * 5 * E, eb), None)
    add("backward", "residual add of ln2's dinp", L, mem(bf * 3 * E, eb), None)
    add("backward", "layernorm ln2 backward into dres (fused)", L, None, mem(bf * 4 * E + 8 * 128 * 2 * C, ea))
    add("backward", "GEMM attproj dinp", L, gemm(bf * (2 * E + C * C), 2 * N * C * C), gemm(bf * (2 * E + C * C), 2 * N * C * C))
    add("backward", "GEMM attproj dw", L, gemm(bf * 2 * E + 8 * C * C, 2 * N * C * C), gemm(bf * 2 * E + 8 * C * C, 2 * N * C * C))
    add("backward", "bias grad attproj", L, mem(bf * E, eb), mem(bf * E, ea))
    add("backward", "attention backward (see attention rows)", L, None, None)
    add("backward", "GEMM qkv dinp", L, gemm(bf * (3 * E + 3 * C * C + E), 2 * N * 3 * C * C),
        gemm(bf * (3 * E + 3 * C * C + E), 2 * N * 3 * C * C))
    add("backward", "GEMM qkv dw", L, gemm(bf * (3 * E + E) + 8 * 3 * C * C, 2 * N * 3 * C * C),
        gemm(bf * (3 * E + E) + 8 * 3 * C * C, 2 * N * 3 * C * C))
    add("backward", "bias grad qkv", L, mem(bf * 3 * E, eb), mem(bf * 3 * E, ea))
    add("backward", "layernorm ln1 backward (before: 3 kernels)", L, mem(bf * 5 * E, eb), None)
    add("backward", "residual add of ln1's dinp", L, mem(bf * 3 * E, eb), None)
    add("backward", "layernorm ln1 backward into dres (fused)", L, None, mem(bf * 4 * E + 8 * 128 * 2 * C, ea))
    # embedding: before, fp32 atomics on dwte (a read-modify-write of 4 bytes per element, at L2) and dwpe
    add("backward", "embedding backward (before: atomics)", 1, mem(bf * E + 8 * E + bf * E + 8 * T * C, eb), None)
    rank_s = N * N * 5 / (132 * 128 * 1.98e9)  # integer compares of the rank kernel on 132 SMs
    add("backward", "embedding backward (rank + grouped sums + wpe)", 1, None,
        (bf * E + 8 * min(N, V) * C + bf * E + 8 * T * C + 4 * 3 * N, 0, ea, None, rank_s))


def optimizer_rows(r, d):
    """Per step: gathering the parameters and the optimizer."""
    mem, gemm, add, eb, ea = r.mem, r.gemm, r.add, r.eb, r.ea
    bf, f4, psi, psi_gathered = d.bf, d.f4, d.psi, d.psi_gathered
    # ---------------- per step: parameters and optimizer ----------------
    add("optimizer", "gather: fp32 -> bf16 cast of units", 1, mem((f4 + bf) * psi_gathered, eb), mem((f4 + bf) * psi_gathered, ea))
    add("optimizer", "gather: copy into the slot (cudaMemcpy)", 1, mem(2 * bf * psi_gathered, 0.9), mem(2 * bf * psi_gathered, 0.9))
    add("optimizer", "zero grad shards (cudaMemset)", 1, mem(f4 * psi, 0.9), mem(f4 * psi, 0.9))
    add("optimizer", "sum of squares (grad norm)", 1, mem(f4 * psi, eb), mem(f4 * psi, ea))
    add("optimizer", "AdamW", 1, mem(28 * psi, eb), mem(28 * psi, ea))


def attention_rows(d, eb, ea, eta_flash, eta_wmma, eta_batched):
    """The attention paths: simple (T x T matrices), fused (WMMA) and flash (cuDNN), forward and backward."""
    mem = Rows(eb, ea, None).mem
    T, E, bf, f4, BHTT, BHT, G = d.T, d.E, d.bf, d.f4, d.BHTT, d.BHT, d.G
    # attention rows: simple and fused (before), flash (after)
    att_simple_f = [
        ("split q,k,v head-major", mem(bf * 6 * E, eb)),
        ("S = q k^T (fp32 out)", (bf * 2 * E + f4 * BHTT, G, ea, eta_batched)),
        ("causal softmax -> P (bf16, kept)", mem(f4 * BHTT + bf * BHTT, eb)),
        ("y = P v", (bf * (BHTT + 2 * E), G, ea, eta_batched)),
        ("merge heads", mem(bf * 2 * E, eb)),
    ]
    att_simple_b = [
        ("split q,k,v,dy head-major", mem(bf * 8 * E, eb)),
        ("dP = dy v^T (fp32 out)", (bf * 2 * E + f4 * BHTT, G, ea, eta_batched)),
        ("softmax backward -> dS (bf16)", mem(bf * BHTT + f4 * BHTT + bf * BHTT, eb)),
        ("dv = P^T dy", (bf * (BHTT + 2 * E), G, ea, eta_batched)),
        ("dq = dS k", (bf * (BHTT + 2 * E), G, ea, eta_batched)),
        ("dk = dS^T q", (bf * (BHTT + 2 * E), G, ea, eta_batched)),
        ("merge dq,dk,dv into dqkv", mem(bf * 6 * E, eb)),
    ]
    att_fused_f = [("flash forward (WMMA)", (bf * 4 * E + f4 * BHT, G, ea, eta_wmma))]  # causal: 2 products halved
    att_fused_b = [("row sums dO.O", mem(bf * 2 * E + f4 * BHT, eb)),
                   ("dk/dv kernel + dq kernel (WMMA)", (bf * (8 * E + 3 * E) + 2 * f4 * BHT, 2.5 * G + G / 2, ea, eta_wmma))]
    att_flash_f = [("flash forward (cuDNN)", (bf * 4 * E + f4 * BHT, G, ea, eta_flash))]
    att_flash_b = [("flash backward (cuDNN, incl. dO.O row sums)", (bf * (5 * E + 3 * E + 2 * E) + 2 * f4 * BHT, 2.5 * G, ea, eta_flash))]
    return dict(simple=(att_simple_f, att_simple_b), fused=(att_fused_f, att_fused_b), flash=(att_flash_f, att_flash_b))


def model(B=16, T=1024, L=12, C=768, NH=12, V=50257, Vp=50304, maxT=1024, eta_before=0.40, eta_after=0.85,
          eta_gemm=0.75, eta_flash=0.50, eta_wmma=0.25, eta_batched=0.50):
    d = dims(B, T, L, C, NH, V, Vp, maxT)
    r = Rows(eta_before, eta_after, eta_gemm)
    forward_rows(r, d)
    backward_rows(r, d)
    optimizer_rows(r, d)
    att = attention_rows(d, eta_before, eta_after, eta_flash, eta_wmma, eta_batched)

    def t_of(e):
        if e is None:
            return 0.0, 0.0
        b, flops, eta_m, eta_f = e[0], e[1], e[2], e[3]
        t = b / (eta_m * HBM)
        if flops and eta_f:
            t = max(t, flops / (eta_f * PEAK))
        if len(e) > 4:
            t += e[4]
        return b, t

    return dict(rows=r.rows, att=att, t_of=t_of, L=L, model_flops=d.model_flops, psi=d.psi, N=d.N)


def fmt_b(b):
    return f"{b / 1e9:.3f}" if b else ""


def fmt_t(t):
    return f"{t * 1e3:.3f}" if t else ""


def report(args):
    m = model(B=args.B, T=args.T, eta_before=args.eta_before, eta_after=args.eta_after, eta_gemm=args.eta_gemm,
              eta_flash=args.eta_flash)
    t_of, L = m["t_of"], m["L"]
    out = []
    out.append(f"d12, B={args.B}, T={args.T} (N = {m['N']} tokens per step), H200: {HBM / 1e12:.1f} TB/s, "
               f"{PEAK / 1e12:.0f} TFLOP/s bf16; eta_before {args.eta_before}, eta_after {args.eta_after}, "
               f"eta_gemm {args.eta_gemm}, eta_flash {args.eta_flash}")
    out.append("")
    out.append("| phase | kernel | x | BEFORE GB | BEFORE ms | AFTER GB | AFTER ms |")
    out.append("|---|---|---|---|---|---|---|")
    tot = {"before": [0.0, 0.0, 0.0, 0.0], "after": [0.0, 0.0, 0.0, 0.0]}  # bytes, time, memory-bound bytes, time
    for group, name, count, before, after in m["rows"]:
        bb, tb = t_of(before)
        ba, ta = t_of(after)
        if before is None and after is None:
            out.append(f"| {group} | *{name}* | {count} | | | | |")
            continue
        out.append(f"| {group} | {name} | {count} | {fmt_b(bb * count)} | {fmt_t(tb * count)} | {fmt_b(ba * count)} | "
                   f"{fmt_t(ta * count)} |")
        for key, e, b, t in (("before", before, bb, tb), ("after", after, ba, ta)):
            tot[key][0] += b * count
            tot[key][1] += t * count
            if e is not None and not e[1]:
                tot[key][2] += b * count
                tot[key][3] += t * count
    # attention
    att = {}
    for path in ("simple", "fused", "flash"):
        fw, bw = m["att"][path]
        b = t = mb = mt = 0.0
        for name, e in fw + bw:
            bb, tt = t_of(e)
            b += bb * L
            t += tt * L
            if not e[1]:
                mb += bb * L
                mt += tt * L
        att[path] = (b, t, mb, mt)
    for path, label, col in (("simple", "attention, BEFORE's --attention simple (fwd+bwd)", "before"),
                             ("fused", "attention, BEFORE's --attention fused (fwd+bwd)", "before"),
                             ("flash", "attention, flash / cuDNN (fwd+bwd)", "after")):
        b, t = att[path][0], att[path][1]
        if col == "before":
            out.append(f"| attention | {label} | {L} | {fmt_b(b)} | {fmt_t(t)} | | |")
        else:
            out.append(f"| attention | {label} | {L} | | | {fmt_b(b)} | {fmt_t(t)} |")
    out.append("")
    out.append("Attention detail (per step, all layers):")
    out.append("")
    out.append("| path | op | GB | ms |")
    out.append("|---|---|---|---|")
    for path in ("simple", "fused", "flash"):
        fw, bw = m["att"][path]
        for name, e in fw + bw:
            bb, tt = t_of(e)
            out.append(f"| {path} | {name} | {fmt_b(bb * L)} | {fmt_t(tt * L)} |")
    out.append("")
    out.append("| variant | bytes moved (GB) | memory-bound kernels (GB) | memory-bound kernels (ms) | predicted ms/step | MFU |")
    out.append("|---|---|---|---|---|---|")
    for label, key, path in (("BEFORE, --attention simple", "before", "simple"),
                             ("BEFORE, --attention fused", "before", "fused"),
                             ("AFTER's kernels, --attention fused", "after", "fused"),
                             ("AFTER, --attention cudnn (flash)", "after", "flash")):
        b = tot[key][0] + att[path][0]
        t = tot[key][1] + att[path][1]
        mb = tot[key][2] + att[path][2]
        mt = tot[key][3] + att[path][3]
        mfu = m["model_flops"] / (t * PEAK)
        out.append(f"| {label} | {b / 1e9:.1f} | {mb / 1e9:.1f} | {mt * 1e3:.1f} | {t * 1e3:.1f} | {100 * mfu:.1f}% |")
    gemm_t = sum(t_of(e)[1] * c for _, _, c, e, _ in m["rows"] if e is not None and e[1])
    out.append("")
    out.append(f"Model FLOPs per step: {m['model_flops'] / 1e12:.2f} TFLOP (MFU 100% = {m['model_flops'] / PEAK * 1e3:.1f} ms); "
               f"the dense products alone (eta_gemm {args.eta_gemm}) take {gemm_t * 1e3:.1f} ms; parameters {m['psi'] / 1e6:.1f} M.")
    return "\n".join(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--B", type=int, default=16)
    ap.add_argument("--T", type=int, default=1024)
    ap.add_argument("--eta-before", type=float, default=0.40)
    ap.add_argument("--eta-after", type=float, default=0.85)
    ap.add_argument("--eta-gemm", type=float, default=0.75)
    ap.add_argument("--eta-flash", type=float, default=0.50)
    print(report(ap.parse_args()))


if __name__ == "__main__":
    main()
