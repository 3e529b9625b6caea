#!/usr/bin/python3
"""Writes the PyTorch golden fixture that the C++ model and trainer are tested against.

Why: the model tests need numbers from an implementation that shares no code with ours. This script builds
GPT-2 in plain PyTorch (its own nn.Module, autograd for the gradients), from fixed-seed weights, and writes
what the C++ side can compare without torch: the weights, a batch, the loss, every gradient and the losses
of ten AdamW steps. The fixture is committed; CI never runs this script.

Run with Debian's torch (1.13, CPU):   /usr/bin/python3 scripts/make_golden.py [--out DIR]

Model (GPT-2 exactly):
  x = wte[tokens] + wpe[0:T]
  per block l:  x = x + attprojw @ attn(ln1(x)) + attprojb
                x = x + fcprojw @ gelu_tanh(fcw @ ln2(x) + fcb) + fcprojb
  attn: qkv = ln1(x) @ qkvw^T + qkvb, split as q, k, v (that order) along the last dim, heads as
        (B, T, NH, hs); causal softmax(q k^T / sqrt(hs)) v
  logits = lnf(x) @ wte^T over all Vp columns; the loss softmax covers only the first V columns
  loss = mean over all B*T positions of cross-entropy; LayerNorm eps 1e-5; GELU tanh approximation.

Weights (torch.manual_seed(WEIGHT_SEED), drawn in the llm.c tensor order below, in float32):
  wte (padded rows V..Vp-1 included), wpe, qkvw, fcw: N(0, 0.02); attprojw, fcprojw: N(0, 0.02/sqrt(2L));
  every bias N(0, 0.02) (so bias gradients are not trivial); LayerNorm weights 1 + N(0, 0.1), biases N(0, 0.1).
Tokens: inputs and targets drawn independently, uniform in [0, V), torch.Generator seeded with TOKEN_SEED.

Files written into the output directory (default tests/fixtures/golden_d2):
  model.bin    llm.c model file, version 3 (fp32): 256 x int32 header [20240326, 3, maxT, V, L, NH, C, Vp, 0...]
               then wte(Vp,C) wpe(maxT,C) ln1w(L,C) ln1b(L,C) qkvw(L,3C,C) qkvb(L,3C) attprojw(L,C,C)
               attprojb(L,C) ln2w(L,C) ln2b(L,C) fcw(L,4C,C) fcb(L,4C) fcprojw(L,C,4C) fcprojb(L,C) lnfw(C) lnfb(C)
  tokens.bin   int32 little-endian: B*T inputs (row-major (B,T)), then B*T targets
  grads.bin    float32 d loss / d param in the model.bin tensor order, no header; computed in float64 from the
               float32 weights (widened exactly) and rounded once to float32
  expected.json  loss (float64 and float32 forward), config, B, T, AdamW settings, the ten losses, grad norms,
               and per-tensor sums of the parameters after the ten steps

The ten AdamW steps (float32, as the C++ trainer runs):
  torch.optim.AdamW(lr=1e-3, betas=(0.9, 0.95), eps=1e-8), weight_decay 0.1 on wte, wpe, qkvw, attprojw, fcw,
  fcprojw (all of wte, padded rows too) and 0 on biases and LayerNorm parameters; constant learning rate;
  before each update the gradient is clipped with torch.nn.utils.clip_grad_norm_(max_norm=1.0), i.e. scaled by
  min(1, 1 / (norm + 1e-6)) where norm is the global L2 norm over all gradients; the same batch every step.
  losses_10_steps[i] is the loss BEFORE update i+1, so losses_10_steps[0] is the initial float32 loss.
  torch's update per element (t = step, 1-based):  p *= 1 - lr*wd;  m = b1 m + (1-b1) g;  v = b2 v + (1-b2) g^2;
  p -= lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps).

Checks done here (the script fails loudly if one does not hold): float32 and float64 losses agree to 1e-6
relative; the padded wte rows get exactly zero gradient; the hand-written GELU matches torch's tanh GELU; a few
central finite differences in float64 match the autograd gradient.
"""
import argparse
import json
import math
import os
import struct

import torch
import torch.nn as nn
import torch.nn.functional as F

WEIGHT_SEED = 1337
TOKEN_SEED = 42
CONFIG = dict(max_seq_len=16, vocab_size=101, padded_vocab_size=128, num_layers=2, num_heads=2, channels=32)
B, T = 2, 8
ADAMW = dict(lr=1e-3, beta1=0.9, beta2=0.95, eps=1e-8, weight_decay=0.1, grad_clip=1.0, steps=10)
LN_EPS = 1e-5
# Parameter names in llm.c file order; the per-layer ones are stacked over L.
LLMC_ORDER = ["wte", "wpe", "ln1w", "ln1b", "qkvw", "qkvb", "attprojw", "attprojb", "ln2w", "ln2b",
              "fcw", "fcb", "fcprojw", "fcprojb", "lnfw", "lnfb"]
DECAYED = {"wte", "wpe", "qkvw", "attprojw", "fcw", "fcprojw"}


def gelu_tanh(x):
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x * x * x)))


class Block(nn.Module):
    def __init__(self, C, NH):
        super().__init__()
        self.NH = NH
        z = lambda *s: nn.Parameter(torch.zeros(*s))
        self.ln1w, self.ln1b = z(C), z(C)
        self.qkvw, self.qkvb = z(3 * C, C), z(3 * C)
        self.attprojw, self.attprojb = z(C, C), z(C)
        self.ln2w, self.ln2b = z(C), z(C)
        self.fcw, self.fcb = z(4 * C, C), z(4 * C)
        self.fcprojw, self.fcprojb = z(C, 4 * C), z(C)

    def attn(self, x):
        Bx, Tx, C = x.shape
        hs = C // self.NH
        qkv = x @ self.qkvw.t() + self.qkvb  # (B, T, 3C)
        q, k, v = qkv.split(C, dim=-1)  # each (B, T, C)
        q = q.view(Bx, Tx, self.NH, hs).transpose(1, 2)  # (B, NH, T, hs)
        k = k.view(Bx, Tx, self.NH, hs).transpose(1, 2)
        v = v.view(Bx, Tx, self.NH, hs).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) / math.sqrt(hs)  # (B, NH, T, T)
        causal = torch.ones(Tx, Tx, dtype=torch.bool).tril()
        att = att.masked_fill(~causal, float("-inf")).softmax(dim=-1)
        y = (att @ v).transpose(1, 2).reshape(Bx, Tx, C)  # (B, T, C)
        return y @ self.attprojw.t() + self.attprojb

    def forward(self, x):
        C = x.shape[-1]
        x = x + self.attn(F.layer_norm(x, (C,), self.ln1w, self.ln1b, LN_EPS))
        h = F.layer_norm(x, (C,), self.ln2w, self.ln2b, LN_EPS)
        h = gelu_tanh(h @ self.fcw.t() + self.fcb)  # (B, T, 4C)
        return x + h @ self.fcprojw.t() + self.fcprojb


class GPT(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        C, L = cfg["channels"], cfg["num_layers"]
        self.V = cfg["vocab_size"]
        self.wte = nn.Parameter(torch.zeros(cfg["padded_vocab_size"], C))  # (Vp, C)
        self.wpe = nn.Parameter(torch.zeros(cfg["max_seq_len"], C))  # (maxT, C)
        self.blocks = nn.ModuleList([Block(C, cfg["num_heads"]) for _ in range(L)])
        self.lnfw, self.lnfb = nn.Parameter(torch.zeros(C)), nn.Parameter(torch.zeros(C))

    def forward(self, idx, targets):
        Tx = idx.shape[1]
        x = self.wte[idx] + self.wpe[:Tx]  # (B, T, C)
        for blk in self.blocks:
            x = blk(x)
        x = F.layer_norm(x, (x.shape[-1],), self.lnfw, self.lnfb, LN_EPS)
        logits = x @ self.wte.t()  # (B, T, Vp): every padded column computed
        masked = logits.masked_fill(torch.arange(logits.shape[-1]) >= self.V, float("-inf"))
        return F.cross_entropy(masked.reshape(-1, masked.shape[-1]), targets.reshape(-1))

    def tensor_groups(self):
        """name -> list of per-layer tensors (one entry for the unstacked ones), in llm.c order."""
        out = {"wte": [self.wte], "wpe": [self.wpe]}
        for name in LLMC_ORDER[2:14]:
            out[name] = [getattr(b, name) for b in self.blocks]
        out["lnfw"], out["lnfb"] = [self.lnfw], [self.lnfb]
        return out


def init_weights(model, cfg):
    """Fills the weights in llm.c order from the global torch RNG (seeded by the caller), float32."""
    L = cfg["num_layers"]
    std = {"wte": 0.02, "wpe": 0.02, "qkvw": 0.02, "fcw": 0.02,
           "attprojw": 0.02 / math.sqrt(2 * L), "fcprojw": 0.02 / math.sqrt(2 * L)}
    with torch.no_grad():
        for name, tensors in model.tensor_groups().items():
            for p in tensors:
                if name in std:
                    p.normal_(0.0, std[name])
                elif name in ("ln1w", "ln2w", "lnfw"):
                    p.normal_(0.0, 0.1).add_(1.0)
                elif name in ("ln1b", "ln2b", "lnfb"):
                    p.normal_(0.0, 0.1)
                else:  # linear biases
                    p.normal_(0.0, 0.02)


def flat_llmc(model, use_grad):
    """All tensors (or their gradients) concatenated in llm.c order, per-layer ones stacked over L."""
    parts = []
    for tensors in model.tensor_groups().values():
        for p in tensors:
            parts.append((p.grad if use_grad else p).detach().reshape(-1))
    return torch.cat(parts)


def write_model_bin(path, model, cfg):
    header = [20240326, 3, cfg["max_seq_len"], cfg["vocab_size"], cfg["num_layers"], cfg["num_heads"],
              cfg["channels"], cfg["padded_vocab_size"]] + [0] * 248
    with open(path, "wb") as f:
        f.write(struct.pack("<256i", *header))
        f.write(flat_llmc(model, False).to(torch.float32).numpy().astype("<f4").tobytes())


def check(cond, msg):
    if not cond:
        raise SystemExit("make_golden: check failed: " + msg)


def finite_difference_check(model, idx, tgt):
    """Central differences in float64 on a few elements of different tensor kinds."""
    groups = model.tensor_groups()
    picks = [("wte", 0, 5 * 32 + 3), ("qkvb", 1, 40), ("ln1w", 0, 7), ("fcprojw", 1, 100), ("lnfb", 0, 2),
             ("attprojb", 0, 11)]
    h = 1e-6
    for name, layer, elem in picks:
        p = groups[name][layer]
        flat = p.data.view(-1)
        old = flat[elem].item()
        with torch.no_grad():
            flat[elem] = old + h
            lp = model(idx, tgt).item()
            flat[elem] = old - h
            lm = model(idx, tgt).item()
            flat[elem] = old
        fd = (lp - lm) / (2 * h)
        ad = p.grad.view(-1)[elem].item()
        check(abs(fd - ad) <= 1e-6 + 1e-5 * abs(ad), f"finite difference {name}[{layer}][{elem}]: fd {fd} autograd {ad}")


def adamw_run(model, idx, tgt):
    """Ten float32 AdamW steps on one batch; returns losses before each update and pre-clip grad norms."""
    decay, no_decay = [], []
    for name, tensors in model.tensor_groups().items():
        (decay if name in DECAYED else no_decay).extend(tensors)
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": ADAMW["weight_decay"]},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=ADAMW["lr"], betas=(ADAMW["beta1"], ADAMW["beta2"]), eps=ADAMW["eps"])
    losses, norms = [], []
    for _ in range(ADAMW["steps"]):
        opt.zero_grad(set_to_none=True)
        loss = model(idx, tgt)
        loss.backward()
        norm = torch.nn.utils.clip_grad_norm_(model.parameters(), ADAMW["grad_clip"])
        losses.append(loss.item())
        norms.append(norm.item())
        opt.step()
    return losses, norms


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests",
                                                   "fixtures", "golden_d2"))
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    torch.set_num_threads(1)  # deterministic reductions
    cfg, V = CONFIG, CONFIG["vocab_size"]

    torch.manual_seed(WEIGHT_SEED)
    model32 = GPT(cfg)
    init_weights(model32, cfg)
    gen = torch.Generator().manual_seed(TOKEN_SEED)
    idx = torch.randint(0, V, (B, T), generator=gen)
    tgt = torch.randint(0, V, (B, T), generator=gen)

    x = torch.linspace(-6, 6, 1001, dtype=torch.float64)
    check(torch.allclose(gelu_tanh(x), F.gelu(x, approximate="tanh"), rtol=0, atol=1e-12), "gelu_tanh vs F.gelu")

    # Gradient reference: the float32 weights widened exactly to float64.
    model64 = GPT(cfg).double()
    model64.load_state_dict({k: v.double() for k, v in model32.state_dict().items()})
    loss64 = model64(idx, tgt)
    loss64.backward()
    with torch.no_grad():
        loss32 = model32(idx, tgt).item()
    check(abs(loss32 - loss64.item()) <= 1e-6 * abs(loss64.item()), f"fp32 loss {loss32} vs fp64 {loss64.item()}")
    check(bool((model64.wte.grad[V:] == 0).all()), "padded wte rows have nonzero gradient")
    check(bool((model64.wte.grad[:V] != 0).any()), "wte gradient is all zero")
    finite_difference_check(model64, idx, tgt)

    write_model_bin(os.path.join(args.out, "model.bin"), model32, cfg)
    with open(os.path.join(args.out, "tokens.bin"), "wb") as f:
        f.write(torch.cat([idx.reshape(-1), tgt.reshape(-1)]).to(torch.int32).numpy().astype("<i4").tobytes())
    grads = flat_llmc(model64, True)
    with open(os.path.join(args.out, "grads.bin"), "wb") as f:
        f.write(grads.to(torch.float32).numpy().astype("<f4").tobytes())

    losses, norms = adamw_run(model32, idx, tgt)
    check(losses[0] == loss32, f"first AdamW-run loss {losses[0]} differs from the fp32 forward {loss32}")
    check(losses[-1] < losses[0], "ten AdamW steps did not lower the loss")
    final_sums = {name: [float(p.detach().double().sum()) for p in ts] for name, ts in model32.tensor_groups().items()}

    expected = {
        "loss": loss64.item(),
        "loss_fp32": loss32,
        "grad_norm": float(grads.norm()),
        "config": cfg,
        "B": B,
        "T": T,
        "seeds": {"weights": WEIGHT_SEED, "tokens": TOKEN_SEED},
        "adamw": dict(ADAMW, decayed=sorted(DECAYED), schedule="constant",
                      clip="torch.nn.utils.clip_grad_norm_: g *= min(1, max_norm / (norm + 1e-6))",
                      dtype="float32", batch="the same batch every step",
                      losses="loss before each update; [0] is the initial loss"),
        "losses_10_steps": losses,
        "grad_norms_10_steps": norms,
        "param_sums_after_10_steps": final_sums,
        "files": {"model.bin": "llm.c model file v3 fp32", "tokens.bin": "int32 B*T inputs then B*T targets",
                  "grads.bin": "float32 gradients in model.bin tensor order, no header (fp64 computed)"},
    }
    with open(os.path.join(args.out, "expected.json"), "w") as f:
        json.dump(expected, f, indent=1)
        f.write("\n")
    print(f"loss64 {loss64.item():.10f} loss32 {loss32:.10f} grad_norm {expected['grad_norm']:.6f}")
    print("losses_10_steps " + " ".join(f"{l:.6f}" for l in losses))
    print(f"wrote {os.path.abspath(args.out)}")


if __name__ == "__main__":
    main()
