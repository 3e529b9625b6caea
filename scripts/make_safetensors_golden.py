#!/usr/bin/python3
"""Writes the safetensors fixture that `gpt import` (src/io/hf_gpt2.cpp) is tested against.

Why: the importer must read the files Hugging Face publishes for GPT-2 and give the same model. This script
shares no code with it: it builds a small GPT-2 in plain PyTorch with Hugging Face's parameter names and
layout (Conv1D weights stored [in, out], applied as y = x @ W + b), writes it as safetensors straight from
the format's specification, and records the loss PyTorch computes on fixed tokens. The fixture is
committed; CI never runs this script (it needs torch; the `safetensors` and `transformers` packages are
not used).

Run with Debian's torch (1.13, CPU):   /usr/bin/python3 scripts/make_safetensors_golden.py [--out DIR]

safetensors (https://github.com/huggingface/safetensors, "Format"): 8 bytes little-endian u64 N, then N
bytes of UTF-8 JSON {"__metadata__": {str: str}, NAME: {"dtype": "F32"|"F16"|"BF16"|..., "shape": [...],
"data_offsets": [begin, end]}, ...} (padded here with spaces to a multiple of 8, as the reference writer
does), then the data region: each tensor's little-endian row-major bytes at [begin, end) from its start.
The tensors are laid out in sorted-name order, not the order the model uses them.

Model (GPT-2 exactly, Hugging Face's GPT2LMHeadModel in eval mode):
  x = wte[tokens] + wpe[0:T]
  per block i:  a = ln_1(x);  qkv = a @ c_attn.weight + c_attn.bias          (c_attn.weight is [C, 3C])
                q, k, v = split(qkv, C); heads (B, T, NH, hs); causal softmax(q k^T / sqrt(hs)) v
                x = x + y @ attn.c_proj.weight + attn.c_proj.bias             ([C, C])
                x = x + gelu_tanh(ln_2(x) @ mlp.c_fc.weight + b) @ mlp.c_proj.weight + b   ([C, 4C], [4C, C])
  logits = ln_f(x) @ wte^T (V columns, no padding); loss = mean cross-entropy; LayerNorm eps 1e-5.

Weights (torch.manual_seed(WEIGHT_SEED), drawn in the order of NAMES below, float32), larger than GPT-2's
init so that a transposed or misplaced tensor moves the loss far beyond the test tolerance:
  wte N(0, 0.3), wpe N(0, 0.1), c_attn/c_fc weights N(0, 0.15), c_proj weights N(0, 0.1), biases N(0, 0.05),
  LayerNorm weights 1 + N(0, 0.2), LayerNorm biases N(0, 0.1).
Tokens: inputs and targets uniform in [0, V), torch.Generator seeded with TOKEN_SEED.

Files written into the output directory (default tests/fixtures/safetensors_gpt2):
  model_fp32.safetensors  names as in openai-community/gpt2 (no "transformer." prefix), with the old
                          attention buffers h.<i>.attn.bias (F32 [1, 1, maxT, maxT] lower triangle) and
                          h.<i>.attn.masked_bias (F32 scalar, shape []); __metadata__ {"format": "pt"}
  model_fp16.safetensors  every weight rounded to F16, names as GPT2LMHeadModel.state_dict() gives them:
                          "transformer." prefix plus the tied lm_head.weight; __metadata__ {"format": "pt"}
  model_bf16.safetensors  every weight rounded to BF16 (nearest even), no prefix, no buffers;
                          __metadata__ {"format": "pt", "n_head": "2"}
  hub_gpt2_h4/            a hub folder: model.safetensors (F16, no prefix, no buffers) and config.json as
                          transformers' save_pretrained writes it, for HUB_CONFIG (C = 64 in 4 heads, which
                          C/64 does not give: only config.json says it); weights drawn with HUB_SEED
  hub_gpt2_h4_sharded/    the same weights as a sharded checkpoint: "transformer." names sorted and cut at half
                          the bytes into model-00001-of-00002.safetensors and model-00002-of-00002.safetensors,
                          model.safetensors.index.json {"metadata": {"total_size"}, "weight_map"}, config.json
  tokens.bin              int32 little-endian: B*T inputs (row-major (B, T)), then B*T targets
  expected.json           config, B, T, and per dtype: "loss" = float32 forward on the file's weights widened
                          to float32 (the number `gpt import` must reproduce), "loss_f64" = the same weights
                          in float64, and "probes" = a few weights by HF name and index with their exact value;
                          "hub": the same for the hub model, plus "loss_one_head" (its loss read with 1 head)

Checks done here (the script fails loudly if one does not hold): the hand-written GELU matches torch's tanh
GELU; float32 and float64 losses agree to 1e-6 relative; using a Conv1D weight transposed changes the loss by
more than 1e-3 relative; reading the hub model with C/64 = 1 head instead of 4 changes its loss by more than
1e-3 relative; the bf16 rounding here matches torch's own .bfloat16().
"""
import argparse
import json
import math
import os
import struct

import torch
import torch.nn.functional as F

WEIGHT_SEED = 2024
TOKEN_SEED = 7
CONFIG = dict(n_layer=2, n_head=2, n_embd=64, n_positions=32, vocab_size=100)
# The hub-folder model: 4 heads of 16 channels, which C/64 does not give, so only config.json can say it.
HUB_SEED = 2025
HUB_CONFIG = dict(n_layer=2, n_head=4, n_embd=64, n_positions=32, vocab_size=100)
HUB_DIR, SHARDED_DIR = "hub_gpt2_h4", "hub_gpt2_h4_sharded"
B, T = 2, 32
LN_EPS = 1e-5
BLOCK = ["ln_1.weight", "ln_1.bias", "attn.c_attn.weight", "attn.c_attn.bias", "attn.c_proj.weight",
         "attn.c_proj.bias", "ln_2.weight", "ln_2.bias", "mlp.c_fc.weight", "mlp.c_fc.bias", "mlp.c_proj.weight",
         "mlp.c_proj.bias"]


def shapes(cfg):
    """Parameter name -> shape, in Hugging Face's order and layout."""
    C, L = cfg["n_embd"], cfg["n_layer"]
    out = {"wte.weight": [cfg["vocab_size"], C], "wpe.weight": [cfg["n_positions"], C]}
    block = {"ln_1.weight": [C], "ln_1.bias": [C], "attn.c_attn.weight": [C, 3 * C], "attn.c_attn.bias": [3 * C],
             "attn.c_proj.weight": [C, C], "attn.c_proj.bias": [C], "ln_2.weight": [C], "ln_2.bias": [C],
             "mlp.c_fc.weight": [C, 4 * C], "mlp.c_fc.bias": [4 * C], "mlp.c_proj.weight": [4 * C, C],
             "mlp.c_proj.bias": [C]}
    for i in range(L):
        for n in BLOCK:
            out[f"h.{i}.{n}"] = block[n]
    out["ln_f.weight"], out["ln_f.bias"] = [C], [C]
    return out


def init_weights(cfg, seed=WEIGHT_SEED):
    torch.manual_seed(seed)
    sd = {}
    for name, shape in shapes(cfg).items():
        t = torch.empty(shape, dtype=torch.float32)
        if name == "wte.weight":
            t.normal_(0.0, 0.3)
        elif name == "wpe.weight":
            t.normal_(0.0, 0.1)
        elif name.endswith(("c_attn.weight", "c_fc.weight")):
            t.normal_(0.0, 0.15)
        elif name.endswith("c_proj.weight"):
            t.normal_(0.0, 0.1)
        elif ".ln_" in name or name.startswith("ln_"):
            if name.endswith(".weight"):
                t.normal_(0.0, 0.2).add_(1.0)
            else:
                t.normal_(0.0, 0.1)
        else:  # Conv1D biases
            t.normal_(0.0, 0.05)
        sd[name] = t
    return sd


def gelu_tanh(x):
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x * x * x)))


def conv1d(x, w, b):
    """Hugging Face's Conv1D: w is [in, out]; y = x @ w + b."""
    return torch.addmm(b, x.reshape(-1, x.shape[-1]), w).view(*x.shape[:-1], w.shape[1])


def forward(sd, cfg, idx, tgt):
    C, NH = cfg["n_embd"], cfg["n_head"]
    hs = C // NH
    Bx, Tx = idx.shape
    x = sd["wte.weight"][idx] + sd["wpe.weight"][:Tx]  # (B, T, C)
    causal = torch.ones(Tx, Tx, dtype=torch.bool).tril()
    for i in range(cfg["n_layer"]):
        p = lambda n: sd[f"h.{i}.{n}"]
        a = F.layer_norm(x, (C,), p("ln_1.weight"), p("ln_1.bias"), LN_EPS)
        qkv = conv1d(a, p("attn.c_attn.weight"), p("attn.c_attn.bias"))  # (B, T, 3C)
        q, k, v = qkv.split(C, dim=-1)
        q = q.view(Bx, Tx, NH, hs).transpose(1, 2)  # (B, NH, T, hs)
        k = k.view(Bx, Tx, NH, hs).transpose(1, 2)
        v = v.view(Bx, Tx, NH, hs).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) / math.sqrt(hs)  # (B, NH, T, T)
        att = att.masked_fill(~causal, float("-inf")).softmax(dim=-1)
        y = (att @ v).transpose(1, 2).reshape(Bx, Tx, C)
        x = x + conv1d(y, p("attn.c_proj.weight"), p("attn.c_proj.bias"))
        h = F.layer_norm(x, (C,), p("ln_2.weight"), p("ln_2.bias"), LN_EPS)
        h = gelu_tanh(conv1d(h, p("mlp.c_fc.weight"), p("mlp.c_fc.bias")))  # (B, T, 4C)
        x = x + conv1d(h, p("mlp.c_proj.weight"), p("mlp.c_proj.bias"))
    x = F.layer_norm(x, (C,), sd["ln_f.weight"], sd["ln_f.bias"], LN_EPS)
    logits = x @ sd["wte.weight"].t()  # (B, T, V)
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), tgt.reshape(-1)).item()


# --- rounding to the file's dtype --------------------------------------------------------------------
def bf16_bits(t):
    """float32 -> bfloat16 bit patterns (int64 tensor), round to nearest even, written out by hand."""
    u = t.contiguous().view(torch.int32).to(torch.int64) & 0xFFFFFFFF
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16) & 0xFFFF


def round_to(t, dtype):
    if dtype == "F32":
        return t.clone()
    if dtype == "F16":
        return t.half().float()
    bits = bf16_bits(t)
    return (bits << 16).to(torch.int32).view(torch.float32)  # exact widening of the bf16 value


def tensor_bytes(t, dtype):
    if dtype == "F32":
        return t.contiguous().numpy().astype("<f4").tobytes()
    if dtype == "F16":
        return t.contiguous().half().numpy().astype("<f2").tobytes()
    return bf16_bits(t).numpy().astype("<u2").tobytes()


def write_safetensors(path, tensors, metadata):
    """tensors: name -> (dtype string, float32 tensor already rounded to dtype)."""
    header = {"__metadata__": metadata}
    blobs, offset = [], 0
    for name in sorted(tensors):
        dtype, t = tensors[name]
        data = tensor_bytes(t, dtype)
        header[name] = {"dtype": dtype, "shape": list(t.shape), "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for b in blobs:
            f.write(b)


def hub_config_json(cfg, torch_dtype):
    """config.json as transformers' save_pretrained writes it for GPT2LMHeadModel (openai-community/gpt2's fields,
    this model's sizes)."""
    return {"activation_function": "gelu_new", "architectures": ["GPT2LMHeadModel"], "attn_pdrop": 0.1,
            "bos_token_id": 50256, "embd_pdrop": 0.1, "eos_token_id": 50256, "initializer_range": 0.02,
            "layer_norm_epsilon": 1e-05, "model_type": "gpt2", "n_ctx": cfg["n_positions"], "n_embd": cfg["n_embd"],
            "n_head": cfg["n_head"], "n_inner": None, "n_layer": cfg["n_layer"], "n_positions": cfg["n_positions"],
            "reorder_and_upcast_attn": False, "resid_pdrop": 0.1, "scale_attn_by_inverse_layer_idx": False,
            "scale_attn_weights": True, "summary_activation": None, "summary_first_dropout": 0.1,
            "summary_proj_to_labels": True, "summary_type": "cls_index", "summary_use_proj": True,
            "torch_dtype": torch_dtype, "transformers_version": "4.40.0", "use_cache": True,
            "vocab_size": cfg["vocab_size"]}


def write_json(path, obj):
    with open(path, "w") as f:
        json.dump(obj, f, indent=2)
        f.write("\n")


def write_hub_folders(root, sd, cfg, dtype):
    """The hub model as a folder (model.safetensors, no prefix, like openai-community/gpt2) and as a sharded
    checkpoint (GPT2LMHeadModel.save_pretrained's "transformer." names split in two, sorted by name, the first
    shard holding the tensors until half the bytes, and model.safetensors.index.json), each with config.json."""
    one = os.path.join(root, HUB_DIR)
    os.makedirs(one, exist_ok=True)
    write_safetensors(os.path.join(one, "model.safetensors"), {k: (dtype, v) for k, v in sd.items()}, {"format": "pt"})
    write_json(os.path.join(one, "config.json"), hub_config_json(cfg, "float16"))
    two = os.path.join(root, SHARDED_DIR)
    os.makedirs(two, exist_ok=True)
    named = {"transformer." + k: v for k, v in sd.items()}
    size = {k: v.numel() * 2 for k, v in named.items()}  # F16
    total, half, at = sum(size.values()), sum(size.values()) // 2, 0
    shards = ({}, {})
    for k in sorted(named):
        shards[0 if at < half else 1][k] = (dtype, named[k])
        at += size[k]
    files = ["model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"]
    weight_map = {}
    for f, part in zip(files, shards):
        check(len(part) > 0, "both shards hold tensors")
        write_safetensors(os.path.join(two, f), part, {"format": "pt"})
        weight_map.update({k: f for k in part})
    write_json(os.path.join(two, "model.safetensors.index.json"),
               {"metadata": {"total_size": total}, "weight_map": dict(sorted(weight_map.items()))})
    write_json(os.path.join(two, "config.json"), hub_config_json(cfg, "float16"))


def check(cond, msg):
    if not cond:
        raise SystemExit("make_safetensors_golden: check failed: " + msg)


PROBES = [("wte.weight", [37, 5]), ("wpe.weight", [31, 63]), ("h.0.attn.c_attn.weight", [3, 150]),
          ("h.1.attn.c_attn.weight", [63, 0]), ("h.1.attn.c_proj.weight", [10, 20]),
          ("h.0.mlp.c_fc.weight", [1, 200]), ("h.1.mlp.c_proj.weight", [255, 7]), ("h.1.mlp.c_fc.bias", [255]),
          ("h.0.ln_2.weight", [9]), ("ln_f.bias", [63])]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests",
                                                   "fixtures", "safetensors_gpt2"))
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    torch.set_num_threads(1)
    cfg, V, L, maxT = CONFIG, CONFIG["vocab_size"], CONFIG["n_layer"], CONFIG["n_positions"]

    x = torch.linspace(-6, 6, 1001, dtype=torch.float64)
    check(torch.allclose(gelu_tanh(x), F.gelu(x, approximate="tanh"), rtol=0, atol=1e-12), "gelu_tanh vs F.gelu")
    sd32 = init_weights(cfg)
    probe = torch.randn(1000) * 3
    check(torch.equal(round_to(probe, "BF16"), probe.bfloat16().float()), "bf16 rounding vs torch")
    gen = torch.Generator().manual_seed(TOKEN_SEED)
    idx = torch.randint(0, V, (B, T), generator=gen)
    tgt = torch.randint(0, V, (B, T), generator=gen)

    expected = {"config": cfg, "B": B, "T": T, "seeds": {"weights": WEIGHT_SEED, "tokens": TOKEN_SEED}, "dtypes": {}}
    for dtype in ("F32", "F16", "BF16"):
        sd = {k: round_to(v, dtype) for k, v in sd32.items()}
        loss = forward(sd, cfg, idx, tgt)
        loss64 = forward({k: v.double() for k, v in sd.items()}, cfg, idx, tgt)
        check(abs(loss - loss64) <= 1e-6 * abs(loss64), f"{dtype}: fp32 loss {loss} vs fp64 {loss64}")
        if dtype == "F32":
            moved = dict(sd)
            moved["h.0.attn.c_proj.weight"] = sd["h.0.attn.c_proj.weight"].t().contiguous()
            other = forward(moved, cfg, idx, tgt)
            check(abs(other - loss) > 1e-3 * abs(loss), f"transposed c_proj barely moves the loss: {other} vs {loss}")
            print(f"F32: transposing h.0.attn.c_proj.weight moves the loss {loss:.6f} -> {other:.6f}")
        tensors = {k: (dtype, v) for k, v in sd.items()}
        if dtype == "F32":
            name, meta = "model_fp32.safetensors", {"format": "pt"}
            tril = torch.ones(maxT, maxT).tril().view(1, 1, maxT, maxT)
            for i in range(L):
                tensors[f"h.{i}.attn.bias"] = ("F32", tril)
                tensors[f"h.{i}.attn.masked_bias"] = ("F32", torch.tensor(-1e4))
        elif dtype == "F16":
            name, meta = "model_fp16.safetensors", {"format": "pt"}
            tensors = {"transformer." + k: v for k, v in tensors.items()}
            tensors["lm_head.weight"] = (dtype, sd["wte.weight"])
        else:
            name, meta = "model_bf16.safetensors", {"format": "pt", "n_head": str(cfg["n_head"])}
        write_safetensors(os.path.join(args.out, name), tensors, meta)
        probes = [{"name": n, "index": i, "value": sd[n][tuple(i)].item()} for n, i in PROBES]
        expected["dtypes"][dtype] = {"file": name, "loss": loss, "loss_f64": loss64, "probes": probes}
        print(f"{dtype}: loss {loss:.9f} (float64 {loss64:.9f}) -> {name}")

    # The hub model: F16 like many hub fine-tunes; its loss with 4 heads, and with the 1 head C/64 would give.
    sd = {k: round_to(v, "F16") for k, v in init_weights(HUB_CONFIG, HUB_SEED).items()}
    loss = forward(sd, HUB_CONFIG, idx, tgt)
    loss64 = forward({k: v.double() for k, v in sd.items()}, HUB_CONFIG, idx, tgt)
    check(abs(loss - loss64) <= 1e-6 * abs(loss64), f"hub: fp32 loss {loss} vs fp64 {loss64}")
    one_head = forward(sd, dict(HUB_CONFIG, n_head=HUB_CONFIG["n_embd"] // 64), idx, tgt)
    check(abs(one_head - loss) > 1e-3 * abs(loss), f"hub: 1 head barely moves the loss: {one_head} vs {loss}")
    write_hub_folders(args.out, sd, HUB_CONFIG, "F16")
    probes = [{"name": n, "index": i, "value": sd[n][tuple(i)].item()} for n, i in PROBES]
    expected["hub"] = {"config": HUB_CONFIG, "seed": HUB_SEED, "dtype": "F16", "folder": HUB_DIR,
                       "sharded_folder": SHARDED_DIR, "loss": loss, "loss_f64": loss64, "loss_one_head": one_head,
                       "probes": probes}
    print(f"hub: loss {loss:.9f} (float64 {loss64:.9f}; with one head {one_head:.9f}) -> {HUB_DIR}, {SHARDED_DIR}")

    with open(os.path.join(args.out, "tokens.bin"), "wb") as f:
        f.write(torch.cat([idx.reshape(-1), tgt.reshape(-1)]).to(torch.int32).numpy().astype("<i4").tobytes())
    with open(os.path.join(args.out, "expected.json"), "w") as f:
        json.dump(expected, f, indent=1)
        f.write("\n")
    print(f"wrote {os.path.abspath(args.out)}")


if __name__ == "__main__":
    main()
