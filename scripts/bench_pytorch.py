#!/usr/bin/env python3
"""PyTorch peer for `gpt bench`: times one GPT-2 training step (forward + backward + grad clip + AdamW).

Why: a speed number means little alone; this trains the same model (scripts/torch_gpt2.py: GPT-2 with tied
wte, tanh GELU, the vocabulary padded to Vp with the loss over the first V) on the same batch shape and
with the same optimizer, on the same machine, so `gpt bench` can be read against it.

At its best on a GPU (--device cuda, the defaults there): bf16 autocast with fp32 master weights,
F.scaled_dot_product_attention (causal), torch.optim.AdamW(fused=True), and torch.compile when
--compile on and it compiles within --compile-timeout seconds (else the eager numbers are reported, with
the reason). On the CPU (torch 1.13 is fine): fp32, and whatever of these the installed torch has; every
fallback is named in the output ("attention", "adamw", "amp", "compile").

Weights: GPT-2's init; the batch is random tokens, the same every step. Timing: the median over --steps
steps after --warmup untimed ones (the device synchronised at the end of each step).

  /usr/bin/python3 scripts/bench_pytorch.py --config d12 -B 4 -T 64 --steps 5 [--json]
  python3 scripts/bench_pytorch.py --device cuda --config d12 -B 16 -T 1024 --compile on --json
  python3 scripts/bench_pytorch.py --device cuda ... --compile on --warm-only   # fills the compile cache
Output: a few description lines, then `ms_per_step <median>` and `tokens_per_s <x>` as the last two lines;
with --json JSON objects instead, the last one the result (with --compile on, one for eager is printed first,
so a run killed during compilation still leaves it).
"""
import argparse
import json
import os
import statistics
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch  # noqa: E402

import torch_gpt2 as tg  # noqa: E402


def parse_args():
    ap = argparse.ArgumentParser(description="PyTorch peer for gpt bench")
    ap.add_argument("--config", default="d12", help="preset: " + " ".join(tg.PRESETS))
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
    ap.add_argument("--json", action="store_true", help="print JSON objects instead of text")
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    ap.add_argument("--amp", default="auto", choices=["auto", "bf16", "off"],
                    help="auto: bf16 autocast on cuda, fp32 on cpu")
    ap.add_argument("--attention", default="auto", choices=["auto", "sdpa", "explicit"],
                    help="auto: F.scaled_dot_product_attention when this torch has it")
    ap.add_argument("--adamw", default="auto", choices=["auto", "fused", "foreach", "plain"],
                    help="auto: fused on cuda when this torch has it, else its default")
    ap.add_argument("--compile", default="off", choices=["off", "on"], help="torch.compile the model")
    ap.add_argument("--compile-timeout", type=float, default=90,
                    help="seconds the first compiled step may take; past it the eager result is reported")
    ap.add_argument("--warm-only", action="store_true",
                    help="with --compile on: compile, run one step, report the compile time and exit (no timing)")
    ap.add_argument("--peak-tflops", type=float, default=989.0,
                    help="peak for MFU (gpt's default on cuda: H100/H200 bf16 dense)")
    a = ap.parse_args()
    if a.config not in tg.PRESETS:
        ap.error(f"--config {a.config}: expected one of {' '.join(tg.PRESETS)}")
    L, NH, C = tg.PRESETS[a.config]
    a.L, a.NH, a.C = a.L or L, a.NH or NH, a.C or C
    if a.C % a.NH or a.T > a.maxT or a.steps < 1:
        ap.error("need C divisible by NH, T <= maxT and --steps >= 1")
    a.Vp = tg.padded_vocab(a.V)
    return a


def make_optimizer(a, model, notes):
    groups = tg.adamw_groups(model, a.weight_decay)
    kw = dict(lr=a.lr, betas=(0.9, 0.95), eps=1e-8)
    want = a.adamw
    if want == "auto":
        want = "fused" if a.device == "cuda" else "default"
    if want == "fused":
        try:
            return torch.optim.AdamW(groups, fused=True, **kw), "fused"
        except (TypeError, RuntimeError, ValueError) as e:
            notes.append(f"fused AdamW unavailable ({str(e).splitlines()[0][:80]}); the default implementation ran")
            want = "default"
    if want == "foreach":
        return torch.optim.AdamW(groups, foreach=True, **kw), "foreach"
    if want == "plain":
        return torch.optim.AdamW(groups, foreach=False, **kw), "plain (for-loop)"
    return torch.optim.AdamW(groups, **kw), "default"


def main():
    a = parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    if a.device == "cuda" and not torch.cuda.is_available():
        raise SystemExit("error: --device cuda: no CUDA GPU visible to torch")
    dev = torch.device(a.device)
    notes = []
    amp = a.amp if a.amp != "auto" else ("bf16" if a.device == "cuda" else "off")
    model = tg.GPT(a.L, a.NH, a.C, a.V, a.maxT).init_gpt2(0).to(dev)
    attention = a.attention if a.attention != "auto" else ("sdpa" if tg.HAS_SDPA else "explicit")
    if attention == "sdpa" and not tg.HAS_SDPA:
        notes.append(f"torch {torch.__version__} has no F.scaled_dot_product_attention; explicit attention ran")
        attention = "explicit"
    model.attention = attention
    opt, adamw = make_optimizer(a, model, notes)
    idx = torch.randint(0, a.V, (a.B, a.T), device=dev)
    tgt = torch.randint(0, a.V, (a.B, a.T), device=dev)
    sync = torch.cuda.synchronize if a.device == "cuda" else (lambda: None)
    n_params = sum(p.numel() for p in model.parameters())
    tokens = a.B * a.T
    fpt = tg.flops_per_token(n_params, a.L, a.C, a.T, a.maxT)

    def step(fwd):
        opt.zero_grad(set_to_none=True)
        if amp == "bf16":
            with torch.autocast(a.device, dtype=torch.bfloat16):
                loss = fwd(idx, tgt)
        else:
            loss = fwd(idx, tgt)
        loss.backward()
        if a.grad_clip > 0:
            torch.nn.utils.clip_grad_norm_(model.parameters(), a.grad_clip)
        opt.step()
        sync()
        return loss

    def timed(fwd, warmup):
        times, loss = [], None
        for i in range(warmup + a.steps):
            t0 = time.perf_counter()
            loss = step(fwd)
            dt = time.perf_counter() - t0
            if i >= warmup:
                times.append(dt)
        return times, float(loss)

    def result(mode, times, loss, extra):
        med = statistics.median(times)
        r = {"framework": f"pytorch {torch.__version__}", "device": a.device, "config": a.config, "L": a.L,
             "NH": a.NH, "C": a.C, "V": a.V, "Vp": a.Vp, "maxT": a.maxT, "B": a.B, "T": a.T, "params": n_params,
             "threads": torch.get_num_threads(), "amp": amp, "attention": attention, "adamw": adamw, "mode": mode,
             "steps": a.steps, "warmup": a.warmup, "loss": loss, "ms_per_step": med * 1e3, "ms_min": min(times) * 1e3,
             "ms_max": max(times) * 1e3, "tokens_per_s": tokens / med, "gflops_per_s": fpt * tokens / med / 1e9,
             "notes": notes}
        if a.device == "cuda":
            r["gpu"] = torch.cuda.get_device_name(0)
            r["mfu"] = tokens / med * fpt / (a.peak_tflops * 1e12)
            r["peak_device_mib"] = torch.cuda.max_memory_allocated() / 2 ** 20
        r.update(extra)
        return r

    def emit(r):
        if a.json:
            print(json.dumps(r), flush=True)

    if a.compile == "off" and a.warm_only:
        raise SystemExit("error: --warm-only needs --compile on")

    # ---- eager (also the fallback when compilation is off, fails or takes too long)
    eager = None
    if not a.warm_only:
        times, loss = timed(model, a.warmup)
        eager = result("eager", times, loss, {"compile": "off" if a.compile == "off" else "pending"})
        emit(eager)
        if a.compile == "off":
            return finish(a, eager)

    # ---- torch.compile, within the time limit
    if not hasattr(torch, "compile"):
        msg = f"torch {torch.__version__} has no torch.compile"
        if a.warm_only:
            print(json.dumps({"warm": False, "compile": msg}), flush=True)
            return
        eager["compile"] = msg + "; eager reported"
        emit(eager)
        return finish(a, eager)

    def on_timeout():
        msg = f"torch.compile did not finish within {a.compile_timeout:g} s"
        if a.warm_only:
            print(json.dumps({"warm": False, "compile": msg}), flush=True)
        else:
            eager["compile"] = msg + "; eager reported"
            emit(eager)
            finish(a, eager)
        sys.stdout.flush()
        os._exit(0)

    timer = threading.Timer(a.compile_timeout, on_timeout)
    timer.daemon = True
    compiled = torch.compile(model)
    t0 = time.perf_counter()
    timer.start()
    try:
        step(compiled)  # compiles forward and backward
    except Exception as e:  # noqa: BLE001 - any compiler failure means: report eager
        timer.cancel()
        msg = f"torch.compile failed: {type(e).__name__}: {str(e).splitlines()[0][:160] if str(e) else ''}"
        if a.warm_only:
            print(json.dumps({"warm": False, "compile": msg}), flush=True)
            return
        eager["compile"] = msg + "; eager reported"
        emit(eager)
        return finish(a, eager)
    timer.cancel()
    compile_s = time.perf_counter() - t0
    if a.warm_only:
        print(json.dumps({"warm": True, "compile": "ok", "compile_s": compile_s}), flush=True)
        return
    times, loss = timed(compiled, max(0, a.warmup - 1))
    comp = result("compiled", times, loss, {"compile": "ok", "compile_s": compile_s,
                                            "eager_ms_per_step": eager["ms_per_step"],
                                            "eager_tokens_per_s": eager["tokens_per_s"]})
    best = comp if comp["tokens_per_s"] >= eager["tokens_per_s"] else dict(eager, compile="ok but slower than eager",
                                                                            compiled_tokens_per_s=comp["tokens_per_s"])
    emit(best)
    finish(a, best)


def finish(a, r):
    if a.json:
        return
    print(f"pytorch {torch.__version__} {r['device']} threads {r['threads']}  {a.config} L{a.L} NH{a.NH} C{a.C} "
          f"Vp{a.Vp} params {r['params'] / 1e6:.2f}M  B{a.B} T{a.T}")
    print(f"amp {r['amp']} attention {r['attention']} adamw {r['adamw']} mode {r['mode']} (compile: {r['compile']})"
          + "".join(f"\nnote: {n}" for n in r["notes"]))
    print(f"steps {a.steps} (+{a.warmup} warmup) ms min {r['ms_min']:.1f} max {r['ms_max']:.1f} "
          f"loss {r['loss']:.4f} gflops_per_s {r['gflops_per_s']:.1f}")
    print(f"ms_per_step {r['ms_per_step']:.3f}")
    print(f"tokens_per_s {r['tokens_per_s']:.1f}")


if __name__ == "__main__":
    main()
