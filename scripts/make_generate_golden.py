#!/usr/bin/python3
"""Writes the PyTorch golden for greedy autoregressive generation (tests/fixtures/golden_d2/generate.json).

Why: the C++ text generation (KV-cached decoding and its sliding-window fallback) needs reference tokens and
logits from an implementation that shares no code with ours. This script loads the committed
tests/fixtures/golden_d2/model.bin into the plain-PyTorch GPT-2 of scripts/make_golden.py (imported, not
rewritten) and runs the generation loop below in float64 (the float32 weights widened exactly). The fixture is
committed; CI never runs this script.

Run with Debian's torch (1.13, CPU):   /usr/bin/python3 scripts/make_generate_golden.py [--out FILE]

Semantics (what the C++ side does):
  tokens = prompt; for each new token:
    window = the last min(len(tokens), max_seq_len) tokens; positions start at 0 for the window
             (x = wte[window] + wpe[0:len(window)]), so past max_seq_len tokens the window slides;
    logits = model(window)[last position], first V columns only (padded columns V..Vp-1 excluded);
    next = argmax(logits), lowest index on ties; append next.
Each step records the chosen token, the V float64 logits it was chosen from, and margin = token's logit
minus the largest other one.

Cases (prompts from tokens.bin, int32: B*T inputs row-major (B=2, T=8), then B*T targets):
  short_prompt: first 5 inputs of row 0, 20 steps (the sequence passes 16 tokens at step 12).
  long_prompt:  the 16 inputs (row 0, then row 1) followed by the first 4 targets (20 ids), 4 steps.
  forced:       first 3 inputs of row 1, then 20 steps that append given tokens instead of the argmax (the
                16 targets, then the first 4 inputs of row 0), and record the logits before each: this
                random model's greedy choice is the same token at every step, so this case is the one whose
                windows hold varied tokens (it passes 16 tokens at step 13).
Checks (the script fails loudly otherwise): model.bin header and size; every greedy margin >= MIN_MARGIN; the
float32 forward (model.float()) picks the same greedy token as float64 at every step.
"""
import argparse
import json
import os
import re
import struct
import sys

import torch
import torch.nn.functional as F

SCRIPTS = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, SCRIPTS)
from make_golden import CONFIG, GPT, LN_EPS, flat_llmc  # noqa: E402

FIXTURE = os.path.join(SCRIPTS, "..", "tests", "fixtures", "golden_d2")
MIN_MARGIN = 1e-3


def fail(msg):
    raise SystemExit("make_generate_golden: " + msg)


def load_model(path, cfg):
    """Reads an llm.c v3 fp32 model file into make_golden.GPT (float32); checks header and size."""
    with open(path, "rb") as f:
        data = f.read()
    if len(data) < 1024:
        fail(f"{path}: too short for the 256-int header")
    header = struct.unpack("<256i", data[:1024])
    want = [20240326, 3, cfg["max_seq_len"], cfg["vocab_size"], cfg["num_layers"], cfg["num_heads"],
            cfg["channels"], cfg["padded_vocab_size"]]
    if list(header[:8]) != want:
        fail(f"{path}: header {list(header[:8])} != expected {want}")
    model = GPT(cfg)
    tensors = [p for group in model.tensor_groups().values() for p in group]  # llm.c order
    n = sum(p.numel() for p in tensors)
    if len(data) != 1024 + 4 * n:
        fail(f"{path}: size {len(data)} != 1024 + 4 * {n}")
    flat = torch.frombuffer(bytearray(data[1024:]), dtype=torch.float32)
    offset = 0
    with torch.no_grad():
        for p in tensors:
            p.copy_(flat[offset:offset + p.numel()].view_as(p))
            offset += p.numel()
    if flat_llmc(model, False).numpy().astype("<f4").tobytes() != data[1024:]:
        fail(f"{path}: weights do not round-trip through the model")
    return model


def load_tokens(path):
    with open(path, "rb") as f:
        data = f.read()
    n = len(data) // 4
    if len(data) % 4 or n % 2:
        fail(f"{path}: size {len(data)} is not 2 * B*T int32")
    ids = list(struct.unpack(f"<{n}i", data))
    return ids[:n // 2], ids[n // 2:]


def last_logits(model, window):
    """Logits (first V columns) at the last position of `window`, positions 0..len-1."""
    idx = torch.tensor([window], dtype=torch.long)
    with torch.no_grad():
        x = model.wte[idx] + model.wpe[:len(window)]
        for blk in model.blocks:
            x = blk(x)
        x = F.layer_norm(x, (x.shape[-1],), model.lnfw, model.lnfb, LN_EPS)
        return (x[0, -1] @ model.wte.t())[:model.V]


def argmax_lowest(logits):
    return max(range(len(logits)), key=logits.__getitem__)  # max() keeps the first of equal keys


def generate(model64, model32, prompt, n_steps, max_t, forced=None):
    """Greedy steps in float64 (or, with `forced`, those tokens appended in turn); returns the step records
    and the max |fp32 - fp64| logit difference."""
    tokens, steps, max_diff = list(prompt), [], 0.0
    for s in range(n_steps):
        window = tokens[-min(len(tokens), max_t):]
        logits = last_logits(model64, window).tolist()
        logits32 = last_logits(model32, window).double().tolist()
        token = forced[s] if forced else argmax_lowest(logits)
        if not forced and argmax_lowest(logits32) != token:
            fail(f"step {s}: float32 picks {argmax_lowest(logits32)}, float64 picks {token}")
        margin = logits[token] - max(v for i, v in enumerate(logits) if i != token)
        if not forced and margin < MIN_MARGIN:
            fail(f"step {s}: margin {margin} < {MIN_MARGIN}; pick another prompt")
        max_diff = max(max_diff, max(abs(a - b) for a, b in zip(logits, logits32)))
        steps.append({"token": token, "logits": logits, "margin": margin})
        tokens.append(token)
    return steps, max_diff


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=os.path.join(FIXTURE, "generate.json"))
    args = ap.parse_args()
    torch.set_num_threads(1)  # deterministic reductions
    cfg = CONFIG
    model32 = load_model(os.path.join(FIXTURE, "model.bin"), cfg)
    model64 = GPT(cfg).double()
    model64.load_state_dict({k: v.double() for k, v in model32.state_dict().items()})
    inputs, targets = load_tokens(os.path.join(FIXTURE, "tokens.bin"))
    if len(inputs) != 16:
        fail(f"tokens.bin holds {len(inputs)} inputs, expected B*T = 16")

    forced = targets + inputs[:4]
    cases = [("short_prompt", inputs[:5], 20, None), ("long_prompt", inputs + targets[:4], 4, None),
             ("forced", inputs[8:11], 20, forced)]
    out, max_diff = [], 0.0
    for name, prompt, n_steps, force in cases:
        steps, diff = generate(model64, model32, prompt, n_steps, cfg["max_seq_len"], force)
        max_diff = max(max_diff, diff)
        out.append({"name": name, "prompt": prompt, "steps": steps})
        print(f"{name}: prompt {prompt} -> {[s['token'] for s in steps]}")

    all_steps = [s for c in out for s in c["steps"]]
    greedy = [s for c in out if c["name"] != "forced" for s in c["steps"]]
    print(f"min greedy margin {min(s['margin'] for s in greedy):.6g}")
    print(f"max |logit| {max(abs(v) for s in all_steps for v in s['logits']):.6g}")
    print(f"max |fp32 - fp64| logit {max_diff:.3g}")
    doc = {"config": cfg, "source": f"scripts/make_generate_golden.py, torch {torch.__version__}, float64",
           "cases": out}
    # Floats are written with repr (shortest round-trip: full float64 precision); number lists on one line.
    text = re.sub(r"\[[^\[\]{}]*\]", lambda m: json.dumps(json.loads(m.group(0))), json.dumps(doc, indent=1))
    open(args.out, "w").write(text + "\n")
    print(f"wrote {os.path.abspath(args.out)}")


if __name__ == "__main__":
    main()
