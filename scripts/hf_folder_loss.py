#!/usr/bin/python3
"""Mean cross-entropy of a Hugging Face GPT-2 folder, read the way transformers' GPT2LMHeadModel.from_pretrained
reads it, on the first batches of an llm.c data shard. numpy only (float64), so CI can run it.

Why: `gpt export --format safetensors --out DIR` must write a folder that transformers loads with no other file
and that computes the same model. transformers is not installable here, so this is an independent reader
written from the formats' specifications; it shares no code with the exporter (src/io/hf_gpt2.cpp,
src/io/hf_config.cpp) or the importer, and none with scripts/make_safetensors_golden.py (which needs torch).

  /usr/bin/python3 scripts/hf_folder_loss.py DIR --data SHARD.bin [-B 4] [-T 64] [--batches 1]
  /usr/bin/python3 scripts/hf_folder_loss.py DIR --pairs TOKENS.bin -B 2 -T 32
  last line: "loss <float64 value>"
  --pairs reads int32 little-endian B*T inputs then B*T targets (tests/fixtures/safetensors_gpt2/tokens.bin), so
  the reader itself can be checked against PyTorch's loss for the fixture's hub folder.

What it reads, as from_pretrained would:
  DIR/config.json      GPT2Config: every field it omits takes GPT2Config's default (n_layer 12, n_head 12,
                       n_embd 768, n_positions 1024, vocab_size 50257, n_inner None = 4 * n_embd,
                       activation_function "gelu_new", layer_norm_epsilon 1e-5, tie_word_embeddings True,
                       scale_attn_weights True, scale_attn_by_inverse_layer_idx False); model_type must be gpt2.
  DIR/model.safetensors  8-byte little-endian header length N, N bytes of JSON {name: {dtype, shape,
                       data_offsets}, "__metadata__": {...}}, then the data region (F32, F16 or BF16 read here).
                       Names with or without the "transformer." prefix (from_pretrained adds or strips the
                       base model prefix); h.<i>.attn.bias / masked_bias buffers are ignored; every parameter
                       GPT2LMHeadModel has must be present with the shape the config implies (from_pretrained
                       would initialise a missing one at random: here that is an error).
  Model: x = wte[ids] + wpe[0:T]; per block x += c_proj(attn(ln_1(x))); x += mlp.c_proj(act(mlp.c_fc(ln_2(x))));
         Conv1D weights are [in, out], applied as x @ W + b; heads = n_head, scores scaled by 1/sqrt(head size)
         when scale_attn_weights (and by 1/(layer + 1) when scale_attn_by_inverse_layer_idx), causal softmax;
         logits = ln_f(x) @ lm_head^T, lm_head = wte when tie_word_embeddings, else the file's lm_head.weight.
  Data: llm.c shard, 256 x int32 header [20240520, 1, ntok, ...] then ntok x uint16; batch k of B x T takes
        tokens [k*B*T, (k+1)*B*T] (inputs the first B*T, targets shifted by one), as `gpt eval` does on one
        shard. The loss is the mean over the batches of each batch's mean cross-entropy.
"""
import argparse
import json
import math
import os
import struct
import sys

import numpy as np

DEFAULTS = dict(n_layer=12, n_head=12, n_embd=768, n_positions=1024, vocab_size=50257, n_inner=None,
                activation_function="gelu_new", layer_norm_epsilon=1e-5, tie_word_embeddings=True,
                scale_attn_weights=True, scale_attn_by_inverse_layer_idx=False)
BLOCK = ["ln_1.weight", "ln_1.bias", "attn.c_attn.weight", "attn.c_attn.bias", "attn.c_proj.weight",
         "attn.c_proj.bias", "ln_2.weight", "ln_2.bias", "mlp.c_fc.weight", "mlp.c_fc.bias", "mlp.c_proj.weight",
         "mlp.c_proj.bias"]


def die(msg):
    sys.exit("hf_folder_loss: " + msg)


def read_config(path):
    with open(path) as f:
        raw = json.load(f)
    if raw.get("model_type", "gpt2") != "gpt2":
        die(f"{path}: model_type is {raw['model_type']!r}, not gpt2")
    cfg = dict(DEFAULTS)
    cfg.update({k: raw[k] for k in DEFAULTS if k in raw})
    return cfg


def widen(raw, dtype, shape):
    if dtype == "F32":
        a = np.frombuffer(raw, dtype="<f4")
    elif dtype == "F16":
        a = np.frombuffer(raw, dtype="<f2")
    elif dtype == "BF16":
        a = (np.frombuffer(raw, dtype="<u2").astype(np.uint32) << 16).view(np.float32)
    else:
        die(f"dtype {dtype} not read here")
    return a.astype(np.float64).reshape(shape)


def read_safetensors(path):
    with open(path, "rb") as f:
        blob = f.read()
    (n,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8:8 + n])
    data = blob[8 + n:]
    out = {}
    for name, t in header.items():
        if name == "__metadata__":
            continue
        b, e = t["data_offsets"]
        out[name] = widen(data[b:e], t["dtype"], t["shape"])
    return out


def load_state(path, cfg):
    """The file's tensors by GPT2Model name (prefix removed), checked against the shapes the config implies."""
    sd = {}
    for name, a in read_safetensors(path).items():
        name = name[len("transformer."):] if name.startswith("transformer.") else name
        if name.endswith(("attn.bias", "attn.masked_bias")) and not name.endswith("c_attn.bias"):
            continue  # causal-mask buffers, rebuilt by the model
        sd[name] = a
    C, V, P, L = cfg["n_embd"], cfg["vocab_size"], cfg["n_positions"], cfg["n_layer"]
    inner = cfg["n_inner"] or 4 * C
    want = {"wte.weight": (V, C), "wpe.weight": (P, C), "ln_f.weight": (C,), "ln_f.bias": (C,)}
    block = {"ln_1.weight": (C,), "ln_1.bias": (C,), "attn.c_attn.weight": (C, 3 * C), "attn.c_attn.bias": (3 * C,),
             "attn.c_proj.weight": (C, C), "attn.c_proj.bias": (C,), "ln_2.weight": (C,), "ln_2.bias": (C,),
             "mlp.c_fc.weight": (C, inner), "mlp.c_fc.bias": (inner,), "mlp.c_proj.weight": (inner, C),
             "mlp.c_proj.bias": (C,)}
    for i in range(L):
        want.update({f"h.{i}.{k}": s for k, s in block.items()})
    if not cfg["tie_word_embeddings"]:
        want["lm_head.weight"] = (V, C)
    for name, shape in want.items():
        if name not in sd:
            die(f"{path}: no {name} (from_pretrained would initialise it at random)")
        if tuple(sd[name].shape) != shape:
            die(f"{path}: {name} has shape {list(sd[name].shape)}, the config implies {list(shape)}")
    return sd


def layer_norm(x, w, b, eps):
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    return (x - mu) / np.sqrt(var + eps) * w + b


def activation(name):
    if name in ("gelu_new", "gelu_pytorch_tanh", "gelu_fast"):
        return lambda x: 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))
    if name == "gelu":
        erf = np.vectorize(math.erf)
        return lambda x: 0.5 * x * (1.0 + erf(x / math.sqrt(2.0)))
    if name == "relu":
        return lambda x: np.maximum(x, 0.0)
    die(f"activation_function {name!r} not implemented here")


def loss_of(sd, cfg, ids, tgt):
    """Mean cross-entropy of GPT2LMHeadModel (eval mode) on ids (B, T) against tgt (B, T)."""
    C, NH, eps = cfg["n_embd"], cfg["n_head"], cfg["layer_norm_epsilon"]
    hs = C // NH
    B, T = ids.shape
    act = activation(cfg["activation_function"])
    x = sd["wte.weight"][ids] + sd["wpe.weight"][:T]  # (B, T, C)
    causal = np.tril(np.ones((T, T), dtype=bool))
    for i in range(cfg["n_layer"]):
        p = lambda n: sd[f"h.{i}.{n}"]
        a = layer_norm(x, p("ln_1.weight"), p("ln_1.bias"), eps)
        qkv = a @ p("attn.c_attn.weight") + p("attn.c_attn.bias")  # (B, T, 3C)
        q, k, v = (qkv[..., j * C:(j + 1) * C].reshape(B, T, NH, hs).transpose(0, 2, 1, 3) for j in range(3))
        att = q @ k.transpose(0, 1, 3, 2)  # (B, NH, T, T)
        if cfg["scale_attn_weights"]:
            att = att / math.sqrt(hs)
        if cfg["scale_attn_by_inverse_layer_idx"]:
            att = att / float(i + 1)
        att = np.where(causal, att, -np.inf)
        att = np.exp(att - att.max(-1, keepdims=True))
        att = att / att.sum(-1, keepdims=True)
        y = (att @ v).transpose(0, 2, 1, 3).reshape(B, T, C)
        x = x + y @ p("attn.c_proj.weight") + p("attn.c_proj.bias")
        h = act(layer_norm(x, p("ln_2.weight"), p("ln_2.bias"), eps) @ p("mlp.c_fc.weight") + p("mlp.c_fc.bias"))
        x = x + h @ p("mlp.c_proj.weight") + p("mlp.c_proj.bias")
    x = layer_norm(x, sd["ln_f.weight"], sd["ln_f.bias"], eps)
    head = sd["wte.weight"] if cfg["tie_word_embeddings"] else sd["lm_head.weight"]
    logits = x @ head.T  # (B, T, V)
    m = logits.max(-1, keepdims=True)
    lse = (m + np.log(np.exp(logits - m).sum(-1, keepdims=True)))[..., 0]
    picked = np.take_along_axis(logits, tgt[..., None], -1)[..., 0]
    return float((lse - picked).mean())


def read_shard(path):
    with open(path, "rb") as f:
        blob = f.read()
    head = np.frombuffer(blob[:1024], dtype="<i4")
    if head[0] != 20240520 or head[1] != 1 or len(blob) != 1024 + 2 * int(head[2]):
        die(f"{path}: not an llm.c data shard (header {head[:3].tolist()}, {len(blob)} bytes)")
    return np.frombuffer(blob[1024:], dtype="<u2").astype(np.int64)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("dir")
    src = ap.add_mutually_exclusive_group(required=True)
    src.add_argument("--data")
    src.add_argument("--pairs")
    ap.add_argument("-B", type=int, default=4)
    ap.add_argument("-T", type=int, default=64)
    ap.add_argument("--batches", type=int, default=1)
    args = ap.parse_args()
    cfg = read_config(os.path.join(args.dir, "config.json"))
    sd = load_state(os.path.join(args.dir, "model.safetensors"), cfg)
    n = args.B * args.T
    if args.pairs:
        pairs = np.fromfile(args.pairs, dtype="<i4").astype(np.int64)
        if len(pairs) != 2 * n:
            die(f"{args.pairs}: {len(pairs)} int32 values, expected 2 * B * T = {2 * n}")
        print(f"loss {loss_of(sd, cfg, pairs[:n].reshape(args.B, args.T), pairs[n:].reshape(args.B, args.T))!r}")
        return
    tok = read_shard(args.data)
    if (args.batches * n + 1) > len(tok):
        die(f"{args.data}: {len(tok)} tokens, fewer than {args.batches} batches of {n} + 1")
    losses = []
    for k in range(args.batches):
        chunk = tok[k * n:(k + 1) * n + 1]
        losses.append(loss_of(sd, cfg, chunk[:-1].reshape(args.B, args.T), chunk[1:].reshape(args.B, args.T)))
    print(f"loss {sum(losses) / len(losses)!r}")


if __name__ == "__main__":
    main()
