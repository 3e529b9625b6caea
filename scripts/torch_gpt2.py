"""GPT-2 in PyTorch, written to be `gpt`'s peer: the model, llm.c model and token files, and `gpt`'s own
learning-rate schedule and data order. Shared by scripts/bench_pytorch.py (speed) and
scripts/gpu_correctness.py (losses against `gpt train`), so both train the same model.

The model is GPT-2 exactly as `gpt` has it (docs/model.md): learned token and position embeddings,
pre-LayerNorm blocks (eps 1e-5), causal attention with scale 1/sqrt(hs), an MLP of 4C with tanh-GELU, a
final LayerNorm, the LM head tied to wte, biases everywhere, the vocabulary padded to Vp (a multiple of 128)
with the padded logits left out of the softmax (the loss is taken over the first V columns).

Attention has two implementations: "sdpa" (F.scaled_dot_product_attention, causal; torch >= 2.0) and
"explicit" (q k^T, mask, softmax, times v), which also lets a caller see the scores and probabilities.
`site` is a hook: every intermediate tensor that a bf16 implementation would store rounded goes through
site(name, tensor), so scripts/gpu_correctness.py can measure how much the loss depends on each.

Runs with torch 1.13 (Debian's, CPU) and torch 2.x (CUDA).
"""
import math
import os
import struct
import glob as _glob

import torch
import torch.nn as nn
import torch.nn.functional as F

MODEL_MAGIC, SHARD_MAGIC = 20240326, 20240520
HAS_SDPA = hasattr(F, "scaled_dot_product_attention")

# name -> (L, NH, C), as gpt's presets (vocab 50257, maxT 1024).
PRESETS = {"d2": (2, 2, 128), "d4": (4, 4, 256), "d6": (6, 6, 384), "d12": (12, 12, 768), "d24": (24, 16, 1024),
           "d36": (36, 20, 1280), "d48": (48, 25, 1600)}


def padded_vocab(V):
    return (V + 127) // 128 * 128


def no_site(name, t):
    return t


class Block(nn.Module):
    def __init__(self, C, NH, maxT):
        super().__init__()
        self.C, self.NH = C, NH
        self.ln1, self.ln2 = nn.LayerNorm(C, eps=1e-5), nn.LayerNorm(C, eps=1e-5)
        self.qkv, self.attproj = nn.Linear(C, 3 * C), nn.Linear(C, C)
        self.fc, self.fcproj = nn.Linear(C, 4 * C), nn.Linear(4 * C, C)
        self.register_buffer("causal", torch.ones(maxT, maxT, dtype=torch.bool).tril(), persistent=False)

    def forward(self, x, attention, site):
        B, T, C = x.shape
        NH, hs = self.NH, C // self.NH
        h = site("ln1", self.ln1(x))                      # (B, T, C)
        qkv = site("qkv", self.qkv(h))                    # (B, T, 3C): q | k | v, head h at columns h*hs
        q, k, v = (t.view(B, T, NH, hs).transpose(1, 2) for t in qkv.split(C, dim=-1))  # (B, NH, T, hs)
        if attention == "sdpa":
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:
            s = site("scores", (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(hs)))  # (B, NH, T, T)
            p = site("probs", s.masked_fill(~self.causal[:T, :T], float("-inf")).softmax(dim=-1))
            y = p @ v                                     # (B, NH, T, hs)
        y = site("attn", y.transpose(1, 2).reshape(B, T, C))
        x = site("res1", x + site("attproj", self.attproj(y)))
        h = site("ln2", self.ln2(x))
        h = site("gelu", F.gelu(site("fc", self.fc(h)), approximate="tanh"))  # (B, T, 4C)
        return site("res2", x + site("fcproj", self.fcproj(h)))


class GPT(nn.Module):
    def __init__(self, L, NH, C, V, maxT, Vp=None):
        super().__init__()
        self.L, self.NH, self.C, self.V, self.maxT = L, NH, C, V, maxT
        self.Vp = Vp or padded_vocab(V)
        self.wte, self.wpe = nn.Embedding(self.Vp, C), nn.Embedding(maxT, C)  # (Vp, C), (maxT, C)
        self.blocks = nn.ModuleList([Block(C, NH, maxT) for _ in range(L)])
        self.lnf = nn.LayerNorm(C, eps=1e-5)
        self.attention = "sdpa" if HAS_SDPA else "explicit"

    def init_gpt2(self, seed=0):
        """GPT-2's init: N(0, 0.02) for matrices and embeddings, residual projections / sqrt(2L), zero
        biases, unit LayerNorm weights (not gpt's own random stream: use a gpt-written model file for that)."""
        g = torch.Generator().manual_seed(seed)
        with torch.no_grad():
            for name, p in self.named_parameters():
                if p.dim() == 2:
                    std = 0.02 / math.sqrt(2 * self.L) if name.endswith("proj.weight") else 0.02
                    p.copy_(torch.randn(p.shape, generator=g) * std)
                elif name.endswith("bias"):
                    p.zero_()
                else:
                    p.fill_(1.0)
        return self

    def forward(self, idx, targets, site=no_site):
        B, T = idx.shape
        x = site("embed", self.wte(idx) + self.wpe.weight[:T])          # (B, T, C)
        for blk in self.blocks:
            x = blk(x, self.attention, site)
        h = site("lnf", self.lnf(x))
        logits = site("logits", h @ self.wte.weight.t())                # (B, T, Vp)
        return F.cross_entropy(logits[..., : self.V].reshape(-1, self.V).float(), targets.reshape(-1))

    # ---- llm.c model files ---------------------------------------------------------------------------
    def _file_tensors(self):
        """The parameters in the llm.c file's order, each as a list of per-layer tensors."""
        b = self.blocks
        return [[self.wte.weight], [self.wpe.weight],
                [x.ln1.weight for x in b], [x.ln1.bias for x in b], [x.qkv.weight for x in b], [x.qkv.bias for x in b],
                [x.attproj.weight for x in b], [x.attproj.bias for x in b], [x.ln2.weight for x in b],
                [x.ln2.bias for x in b], [x.fc.weight for x in b], [x.fc.bias for x in b],
                [x.fcproj.weight for x in b], [x.fcproj.bias for x in b], [self.lnf.weight], [self.lnf.bias]]

    @classmethod
    def from_llmc(cls, path):
        """Loads an llm.c model file (header [20240326, 3|5, maxT, V, L, NH, C, Vp], fp32 or bf16)."""
        with open(path, "rb") as f:
            data = f.read()
        h = struct.unpack("<256i", data[:1024])
        if h[0] != MODEL_MAGIC or h[1] not in (3, 5):
            raise SystemExit(f"{path}: not an llm.c model file (magic {h[0]}, version {h[1]})")
        maxT, V, L, NH, C, Vp = h[2:8]
        m = cls(L, NH, C, V, maxT, Vp)
        dtype = torch.float32 if h[1] == 3 else torch.bfloat16
        flat = torch.frombuffer(bytearray(data[1024:]), dtype=dtype).float()
        n = sum(t.numel() for group in m._file_tensors() for t in group)
        if flat.numel() != n:
            raise SystemExit(f"{path}: {flat.numel()} values after the header, the shape needs {n}")
        off = 0
        with torch.no_grad():
            for group in m._file_tensors():
                for t in group:
                    t.copy_(flat[off: off + t.numel()].view_as(t))
                    off += t.numel()
        return m

    def save_llmc(self, path):
        """Writes a version-3 (fp32) llm.c model file."""
        header = [MODEL_MAGIC, 3, self.maxT, self.V, self.L, self.NH, self.C, self.Vp] + [0] * 248
        with open(path + ".tmp", "wb") as f:
            f.write(struct.pack("<256i", *header))
            for group in self._file_tensors():
                for t in group:
                    f.write(t.detach().float().contiguous().cpu().numpy().tobytes())
        os.replace(path + ".tmp", path)


def flops_per_token(n_params, L, C, T, maxT):
    """gpt's MFU accounting (src/train/trainer.cpp): 6 (params - wpe) + 12 L C T per token."""
    return 6.0 * (n_params - maxT * C) + 12.0 * L * C * T


# ---- gpt's data order and learning-rate schedule -------------------------------------------------------
def read_shard(path):
    """An llm.c token shard: 256 x int32 header [20240520, 1, ntok], then ntok uint16 ids -> int64 tensor."""
    with open(path, "rb") as f:
        data = f.read()
    h = struct.unpack("<256i", data[:1024])
    if h[0] != SHARD_MAGIC or h[1] != 1 or len(data) != 1024 + 2 * h[2]:
        raise SystemExit(f"{path}: not an llm.c token shard (magic {h[0]}, version {h[1]}, {len(data)} bytes)")
    ids = torch.frombuffer(bytearray(data[1024:]), dtype=torch.int16).to(torch.int64) & 0xFFFF
    return ids


class DataLoader:
    """src/io/data_loader.cpp with one rank: shards in sorted glob order; each micro-batch takes B*T+1
    consecutive tokens at the current offset (targets shifted by one), the offset moves on by B*T; when the
    rest of a shard cannot hold B*T+1 tokens, the next shard (after the last, the first) from offset 0."""

    def __init__(self, pattern, B, T):
        self.files = sorted(_glob.glob(pattern))
        if not self.files:
            raise SystemExit(f"no token shards match {pattern}")
        self.shards = [read_shard(f) for f in self.files]
        self.B, self.T, self.shard, self.offset = B, T, 0, 0
        for f, s in zip(self.files, self.shards):
            if s.numel() < B * T + 1:
                raise SystemExit(f"{f}: {s.numel()} tokens, fewer than one micro-batch needs ({B * T + 1})")

    def next_batch(self):
        n = self.B * self.T
        tok = self.shards[self.shard][self.offset: self.offset + n + 1]
        x, y = tok[:-1].view(self.B, self.T), tok[1:].view(self.B, self.T)
        self.offset += n
        if self.offset + n + 1 > self.shards[self.shard].numel():
            self.shard, self.offset = (self.shard + 1) % len(self.shards), 0
        return x, y


def f32(x):
    """x rounded to the nearest float32 (as a Python float)."""
    return struct.unpack("<f", struct.pack("<f", x))[0]


def lr_at(step, peak, warmup, total, min_lr_frac):
    """src/train/lr_schedule.cpp in its own float/double arithmetic; step is 0-based."""
    peak, min_lr_frac = f32(peak), f32(min_lr_frac)
    if step < warmup:
        return f32(f32(peak * f32(float(step + 1))) / f32(float(warmup)))
    decay_steps = total - warmup
    if decay_steps <= 1:
        return peak
    progress = min(1.0, (step - warmup) / (decay_steps - 1))
    min_lr = f32(peak * min_lr_frac)  # float * float in C++, then widened to double
    return f32(min_lr + 0.5 * (peak - min_lr) * (1.0 + math.cos(math.pi * progress)))


def adamw_groups(model, weight_decay):
    """gpt decays matrices and embeddings (the 2-D parameters) and nothing else."""
    decay = [p for p in model.parameters() if p.dim() == 2]
    rest = [p for p in model.parameters() if p.dim() != 2]
    return [{"params": decay, "weight_decay": weight_decay}, {"params": rest, "weight_decay": 0.0}]
