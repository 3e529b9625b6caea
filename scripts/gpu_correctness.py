#!/usr/bin/env python3
"""`gpt train` against PyTorch on the same device: the same llm.c model file, the same token batches, the same
AdamW, learning-rate schedule and clipping; the per-step losses must agree within a derived bound.

What runs (all in --workdir):
  1. tokens: `gpt tokenize` of data/tinyshakespeare/input.txt (or --tokens GLOB);
  2. the initial model: `gpt train --steps 0 --out init` on the CPU backend writes init/model.bin (gpt's
     own deterministic init; if that fails, PyTorch writes a GPT-2-initialised file and says so);
  3. `gpt train --init-from init/model.bin --metrics ...` for every attention path, and `gpt memplan` for the
     same run (its device peak must equal the ledger's peak that the metrics report, to the byte);
  4. PyTorch (scripts/torch_gpt2.py) from the same file on the same batches: the reference R in fp32 (no TF32),
     and, with --device cuda, two bf16-autocast runs (SDPA attention, and explicit attention) as the measured
     noise floor. gpt's data order and schedule are replicated in torch_gpt2.py; AdamW is torch.optim.AdamW
     with gpt's float32 hyper-parameters, weight decay on the 2-D parameters only, and the global gradient
     norm clipped the way src/train/optimizer.cpp does (scale = clip / (norm + 1e-6) when norm > clip).

The bound (--device cuda; gpt computes in bf16, R in fp32). It is derived, not tuned:
  * Forward rounding at step s. A bf16 implementation stores each intermediate tensor a (and each weight)
    rounded to nearest: a + d with |d| <= ulp/2 and ulp <= 2u|a|, u = 2^-8 (bf16 keeps 8 significant bits).
    Under the standard model of rounding errors (independent, uniform over +-ulp/2), d has standard
    deviation <= u|a|/sqrt(3). To first order the loss moves by sum_k (dloss/da_k) d_k, so its standard
    deviation is at most  sigma_s = (u/sqrt(3)) * sqrt( sum over sites k, elements i of (g_ki a_ki)^2 ),
    g = dloss/da, computed exactly by the fp32 reference at step s's parameters. The sites are every
    tensor a bf16 GPT-2 step may store rounded: embedding output, and per block ln1, qkv, attention scores
    and probabilities, attention output, attproj, the residual stream after attention, ln2, fc, GELU,
    fcproj, the residual stream after the MLP; then lnf and the logits; and every parameter (gathered in
    bf16). Listing a site that gpt keeps in fp32 only widens the bound. Accumulation inside fp32 sums
    (relative 2^-24 per term) is negligible beside these. A difference beyond z = 6 standard deviations
    has probability 2e-9 for a Gaussian; the bound at step 1, where both sides hold identical parameters,
    is  tol_1 = 6 sigma_1.
  * Trajectory (steps s >= 2). After the first update the parameters differ by the gradient's rounding
    noise, amplified by AdamW's normalised steps; that is not derived here but measured: F_s = the largest
    |T_k(r) - R(r)| over r in 2..s and the PyTorch bf16 runs k (the noise floor of bf16 training on this
    model, these tokens, this GPU). gpt is allowed M = 3 times that: gpt rounds at more sites than autocast
    does (the residual stream and the gathered weights: <= 2 more roundings per block beside autocast's ~9,
    <= 1.2x when independent errors add in quadrature), and a distance measured on two runs can sit below
    its typical size by 2x (|N(0,1)| < 0.5 has probability 0.38); 1.2 x 2 < 3.
    tol_s = 6 sigma_s + 3 F_s.
  * Two attention paths of gpt against each other: two such noises, sqrt(2) tol_s.
  * Self-check of the derivation: PyTorch's own bf16 runs must sit within 6 sigma_1 of R at step 1; if not,
    the bound is reported invalid (the verdict fails: the check could not be established).
  * Power: the reference loss must fall by at least 10 times the largest tolerance over the run, or a
    wrong gradient could hide inside the tolerance; otherwise the check fails as inconclusive.
With --device cpu both sides compute in fp32: the rule is DESIGN.md's fp32 parity, |G - R| <= 1e-5 |R| per
step (the bf16 quantities are still computed and reported, to exercise this script).

Output: a table on stdout, and --json FILE with every number and each check's verdict; exit 0 only when
every check passed.
  scripts/gpu_correctness.py --gpt build-gpu/gpt --device cuda --json out.json
  /usr/bin/python3 scripts/gpu_correctness.py --gpt build-cpu/gpt --device cpu --n-layer 2 --n-head 2 \
      --d-model 64 --seq-len 64 --tokenizer byte -B 4 -T 64 --steps 10
"""
import argparse
import json
import math
import os
import re
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch  # noqa: E402

import torch_gpt2 as tg  # noqa: E402

U_BF16 = 2.0 ** -8   # bf16 unit roundoff (8 significant bits, round to nearest)
Z = 6.0              # standard deviations of the forward rounding noise
M_TRAJ = 3.0         # multiple of the measured bf16 trajectory floor
FP32_RTOL = 1e-5     # DESIGN.md: fp32 parity, <= 1e-5 relative on losses
POWER_MIN = 10.0     # the reference's loss drop over the largest tolerance


def parse_args():
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    ap = argparse.ArgumentParser(description="gpt train vs PyTorch: per-step losses within a derived bound",
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    ap.add_argument("--gpt", default=os.path.join(root, "build", "gpt"), help="the gpt binary")
    ap.add_argument("--workdir", default=os.path.join(root, "build", "gpu_correctness"))
    ap.add_argument("--device", default="cuda", choices=["cuda", "cpu"],
                    help="cuda: gpt --device cuda (bf16) vs torch; cpu: both fp32 on the CPU")
    ap.add_argument("--config", default="d12", help="preset: " + " ".join(tg.PRESETS))
    ap.add_argument("--n-layer", type=int)
    ap.add_argument("--n-head", type=int)
    ap.add_argument("--d-model", type=int)
    ap.add_argument("--seq-len", type=int, default=1024, help="maxT (position embeddings)")
    ap.add_argument("--tokenizer", default="gpt2", choices=["gpt2", "byte"],
                    help="tokens of data/tinyshakespeare/input.txt (vocab 50257 or 257)")
    ap.add_argument("--tokens", help="GLOB of existing llm.c token shards instead (then --vocab is needed)")
    ap.add_argument("--vocab", type=int, help="vocabulary (default: from --tokenizer)")
    ap.add_argument("-B", type=int, default=8)
    ap.add_argument("-T", type=int, default=256)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--warmup", type=int, default=4)
    ap.add_argument("--min-lr-frac", type=float, default=0.1)
    ap.add_argument("--weight-decay", type=float, default=0.1)
    ap.add_argument("--grad-clip", type=float, default=1.0)
    ap.add_argument("--seed", type=int, default=1337, help="gpt's init seed")
    ap.add_argument("--attention", default="auto",
                    help="gpt attention paths, comma-separated (auto: every one `gpt train --help` lists; cpu: simple)")
    ap.add_argument("--no-floor", action="store_true", help="skip the PyTorch bf16 runs (the trajectory floor)")
    ap.add_argument("--rule", default="auto", choices=["auto", "fp32", "bf16"],
                    help="the agreement rule (auto: fp32 parity on cpu, the derived bf16 bound on cuda); "
                         "--device cpu --rule bf16 exercises the GPU run's checks on the CPU")
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--timeout", type=float, default=120, help="seconds per gpt command")
    ap.add_argument("--json", help="write the results here")
    a = ap.parse_args()
    L, NH, C = tg.PRESETS.get(a.config, (None, None, None))
    a.L, a.NH, a.C = a.n_layer or L, a.n_head or NH, a.d_model or C
    if None in (a.L, a.NH, a.C):
        ap.error(f"--config {a.config} is no preset; give --n-layer, --n-head and --d-model")
    a.V = a.vocab or (257 if a.tokenizer == "byte" else 50257)
    if a.rule == "auto":
        a.rule = "fp32" if a.device == "cpu" else "bf16"
    if a.T > a.seq_len or a.C % a.NH or a.steps < 1:
        ap.error("need T <= seq-len, C divisible by NH and --steps >= 1")
    if not (os.path.isfile(a.gpt) and os.access(a.gpt, os.X_OK)):
        ap.error(f"--gpt {a.gpt}: no executable there (build it first: scripts/build.sh)")
    return a


class Log:
    def __init__(self, path):
        self.f = open(path, "w")

    def cmd(self, argv, timeout, tag):
        """Runs a gpt command; its output goes to the log. Returns (rc, stdout, seconds)."""
        t0 = time.time()
        self.f.write(f"\n$ {' '.join(argv)}\n")
        self.f.flush()
        try:
            p = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=timeout)
            rc, out = p.returncode, p.stdout
        except subprocess.TimeoutExpired as e:
            rc, out = 124, (e.stdout.decode() if isinstance(e.stdout, bytes) else (e.stdout or "")) + \
                f"\n[{tag}: timed out after {timeout} s]\n"
        self.f.write(out)
        self.f.flush()
        return rc, out, time.time() - t0


def tail(text, n=3):
    return " | ".join(l.strip() for l in text.strip().splitlines()[-n:])


def model_flags(a):
    return ["--n-layer", str(a.L), "--n-head", str(a.NH), "--d-model", str(a.C), "--seq-len", str(a.seq_len),
            "--vocab", str(a.V)]


def attention_paths(a, log):
    if a.attention != "auto":
        return a.attention.split(",")
    if a.device == "cpu":
        return ["simple"]
    rc, out, _ = log.cmd([a.gpt, "train", "--help"], 30, "help")
    m = re.search(r"--attention ([a-z0-9_]+(?:\|[a-z0-9_]+)+)", out)
    return m.group(1).split("|") if m else ["simple"]


# ---- PyTorch training, gpt's step replicated ---------------------------------------------------------------
class Sites:
    """Collects every site tensor of a forward pass; after backward, sum (dloss/da * a)^2 per site name."""

    def __init__(self):
        self.t = []

    def __call__(self, name, x):
        if x.requires_grad:
            x.retain_grad()
            self.t.append((name, x))
        return x

    def sums(self, model):
        out = {}
        for name, x in self.t:
            if x.grad is not None:
                out[name] = out.get(name, 0.0) + float((x.grad.double() * x.detach().double()).pow(2).sum())
        out["params"] = sum(float((p.grad.double() * p.detach().double()).pow(2).sum())
                            for p in model.parameters() if p.grad is not None)
        self.t = []
        return out


def train_torch(a, model_path, dev, mode, attention):
    """mode fp32 (the reference, with the rounding-sensitivity sums) or bf16 (autocast, fp32 master weights)."""
    model = tg.GPT.from_llmc(model_path).to(dev)
    if attention == "sdpa" and not tg.HAS_SDPA:
        attention = "explicit"
    model.attention = attention
    b1, b2, eps, wd = tg.f32(0.9), tg.f32(0.95), tg.f32(1e-8), tg.f32(a.weight_decay)
    opt = torch.optim.AdamW(tg.adamw_groups(model, wd), lr=0.0, betas=(b1, b2), eps=eps)
    loader = tg.DataLoader(a.pattern, a.B, a.T)
    clip = tg.f32(a.grad_clip)
    rows = []
    for s in range(a.steps):
        x, y = (t.to(dev) for t in loader.next_batch())
        opt.zero_grad(set_to_none=True)
        sites = Sites() if mode == "fp32" else tg.no_site
        if mode == "bf16":
            with torch.autocast(dev.type, dtype=torch.bfloat16):
                loss = model(x, y, sites)
        else:
            loss = model(x, y, sites)
        loss.backward()
        grads = [p.grad for p in model.parameters() if p.grad is not None]
        norm = math.sqrt(sum(float(g.double().pow(2).sum()) for g in grads))
        lr = tg.lr_at(s, a.lr, a.warmup, a.steps, a.min_lr_frac)
        row = {"step": s + 1, "loss": float(loss), "grad_norm": norm, "lr": lr}
        if mode == "fp32":
            sums = sites.sums(model)
            row["sigma"] = U_BF16 / math.sqrt(3.0) * math.sqrt(sum(sums.values()))
            row["sigma_by_site"] = {k: U_BF16 / math.sqrt(3.0) * math.sqrt(v) for k, v in sums.items()}
        if math.isfinite(row["loss"]) and math.isfinite(norm):  # gpt skips the update otherwise
            if clip > 0 and norm > clip:
                scale = tg.f32(clip / (norm + 1e-6))
                for g in grads:
                    g.mul_(scale)
            for group in opt.param_groups:
                group["lr"] = lr
            opt.step()
        rows.append(row)
    if dev.type == "cuda":
        torch.cuda.synchronize()
    return {"mode": mode, "attention": attention, "steps": rows}


# ---- gpt -----------------------------------------------------------------------------------------------------
def read_metrics(path):
    rows = []
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line.startswith("{"):
                rows.append(json.loads(line))
    return rows


class Checks:
    """The named pass/fail checks and the results JSON; finish() prints the verdict and exits."""

    def __init__(self, a, res):
        self.a, self.res, self.list = a, res, res["checks"]

    def __call__(self, name, ok, detail):
        self.list.append({"name": name, "ok": bool(ok), "detail": detail})
        print(f"  [{'ok' if ok else 'FAIL'}] {name}: {detail}", flush=True)

    def finish(self):
        res, checks = self.res, self.list
        res["ok"] = bool(checks) and all(c["ok"] for c in checks)
        if self.a.json:
            with open(self.a.json, "w") as f:
                json.dump(res, f, indent=1)
        print(f"gpu_correctness: {'PASS' if res['ok'] else 'FAIL'} ({sum(c['ok'] for c in checks)}/{len(checks)} checks)")
        sys.exit(0 if res["ok"] else 1)


def prepare_tokens(a, log, root, check):
    """Step 1: sets a.pattern to the token shards (tokenizing Tiny Shakespeare unless --tokens); False on failure."""
    if a.tokens:
        a.pattern = a.tokens
        return True
    tokdir = os.path.join(a.workdir, f"tokens_{a.tokenizer}")
    rc, out, secs = log.cmd([a.gpt, "tokenize", "--tokenizer", a.tokenizer, "--input",
                             os.path.join(root, "data", "tinyshakespeare", "input.txt"), "--out", tokdir,
                             "--val-fraction", "0", "--data-dir", os.path.join(root, "data")], a.timeout, "tokenize")
    if rc != 0:
        check("tokens", False, f"gpt tokenize failed (rc {rc}): {tail(out)}")
        return False
    a.pattern = os.path.join(tokdir, "train_*.bin")
    return True


def initial_model(a, log, res):
    """Step 2: the initial model file, written by gpt (PyTorch's GPT-2 init when that fails, said in the notes)."""
    init_dir = os.path.join(a.workdir, "init")
    model_path = os.path.join(init_dir, "model.bin")
    if os.path.exists(model_path):
        os.remove(model_path)
    rc, out, secs = log.cmd([a.gpt, "train", "--train", a.pattern, "--steps", "0", "--out", init_dir, "--device", "cpu",
                             "--peak-tflops", "1", "--tokenizer", "none", "--seed", str(a.seed), "-B", str(a.B), "-T",
                             str(a.T)] + model_flags(a), a.timeout, "init")
    if rc == 0 and os.path.exists(model_path):
        res["init"] = f"gpt train --steps 0 --out (gpt's init, seed {a.seed})"
    else:
        os.makedirs(init_dir, exist_ok=True)
        tg.GPT(a.L, a.NH, a.C, a.V, a.seq_len).init_gpt2(a.seed).save_llmc(model_path)
        res["init"] = "written by PyTorch (GPT-2 init)"
        res["notes"].append(f"gpt train --steps 0 --out did not write model.bin (rc {rc}: {tail(out)}); "
                            "the initial model was written by PyTorch instead")
    print(f"  initial model: {res['init']}", flush=True)
    return model_path


def run_gpt(a, log, path, model_path, check):
    """Step 3, one attention path: gpt's per-step metrics (None on failure), and memplan checked against the
    ledger of the same run."""
    mfile = os.path.join(a.workdir, f"metrics_{path}.jsonl")
    if os.path.exists(mfile):
        os.remove(mfile)
    rc, out, secs = log.cmd([a.gpt, "train", "--init-from", model_path, "--train", a.pattern, "--steps", str(a.steps),
                             "-B", str(a.B), "-T", str(a.T), "--lr", repr(a.lr), "--warmup", str(a.warmup),
                             "--min-lr-frac", repr(a.min_lr_frac), "--weight-decay", repr(a.weight_decay),
                             "--grad-clip", repr(a.grad_clip), "--device", a.device, "--attention", path,
                             "--metrics", mfile, "--tokenizer", "none", "--seed", str(a.seed)]
                            + (["--peak-tflops", "1"] if a.device == "cpu" else []), a.timeout, path)
    rows = read_metrics(mfile) if os.path.exists(mfile) else []
    if rc != 0 or len(rows) != a.steps:
        check(f"gpt train --attention {path}", False, f"rc {rc}, {len(rows)}/{a.steps} steps: {tail(out)}")
        return None
    print(f"  gpt --attention {path}: {a.steps} steps in {secs:.1f} s", flush=True)
    rc, out, _ = log.cmd([a.gpt, "memplan", "-B", str(a.B), "-T", str(a.T), "--device", a.device,
                          "--attention", path, "--json"] + model_flags(a), 30, "memplan")
    try:
        plan = json.loads([l for l in out.splitlines() if l.startswith("{")][-1])["device_peak_bytes"]
    except (IndexError, KeyError, ValueError):
        check(f"memplan {path}", False, f"gpt memplan gave no device_peak_bytes (rc {rc}): {tail(out)}")
        return rows
    peaks = sorted({int(r["max_rank_device_peak_bytes"]) for r in rows})
    check(f"memplan == ledger ({path})", peaks == [plan],
          f"memplan device peak {plan} bytes; the ledger's peak per step {peaks} bytes"
          + ("" if peaks == [plan] else f" (difference {peaks[-1] - plan:+d})"))
    return rows


def run_torch(a, model_path, dev, res):
    """Step 4: the fp32 reference and the bf16 runs that measure the trajectory's noise floor."""
    t0 = time.time()
    ref = train_torch(a, model_path, dev, "fp32", "explicit")
    floors = []
    if not a.no_floor:
        floors.append(train_torch(a, model_path, dev, "bf16", "sdpa"))
        if floors[0]["attention"] != "explicit":
            floors.append(train_torch(a, model_path, dev, "bf16", "explicit"))
    print(f"  torch: fp32 reference + {len(floors)} bf16 run(s) in {time.time() - t0:.1f} s "
          f"(bf16 attention: {', '.join(f['attention'] for f in floors) or 'none'})", flush=True)
    res["torch_ref"] = ref
    res["torch_bf16"] = floors
    return ref, floors


def tolerances(a, ref, floors):
    """Step 5: tol_s = 6 sigma_s + 3 F_s (the module's docstring derives it). Returns (R, sigma, T_k, tol)."""
    R = [r["loss"] for r in ref["steps"]]
    sig = [r["sigma"] for r in ref["steps"]]
    Tk = [[r["loss"] for r in f["steps"]] for f in floors]
    tol, F = [], 0.0
    for s in range(a.steps):
        if s >= 1 and Tk:
            F = max([F] + [abs(t[s] - R[s]) for t in Tk])
        tol.append(Z * sig[s] + (M_TRAJ * F if s >= 1 else 0.0))
    return R, sig, Tk, tol


def print_table(a, ref, floors, gpt_runs, R, sig, Tk, tol):
    names = list(gpt_runs)
    hdr = f"{'step':>4} {'lr':>9} {'torch fp32':>11} " + "".join(f"{'bf16 ' + f['attention']:>14}" for f in floors) + \
        f" {'6 sigma':>9} {'tol':>9} " + "".join(f"{'gpt ' + n:>13} {'diff':>9} " for n in names)
    print(hdr)
    for s in range(a.steps):
        line = f"{s + 1:>4} {ref['steps'][s]['lr']:>9.3e} {R[s]:>11.6f} " + "".join(f"{t[s]:>14.6f}" for t in Tk) + \
            f" {Z * sig[s]:>9.2e} {tol[s]:>9.2e} "
        for n in names:
            g = gpt_runs[n][s]["loss"]
            line += f"{g:>13.6f} {g - R[s]:>+9.2e} "
        print(line)


def check_fp32(a, gpt_runs, ref, floors, R, sig, Tk, check, res):
    """--rule fp32 (the CPU): gpt's losses equal the fp32 reference to FP32_RTOL."""
    for n, rows in gpt_runs.items():
        rel = [abs(rows[s]["loss"] - R[s]) / abs(R[s]) for s in range(a.steps)]
        worst = max(range(a.steps), key=lambda s: rel[s])
        check(f"fp32 losses ({n})", max(rel) <= FP32_RTOL,
              f"max |gpt - torch| / torch = {max(rel):.2e} at step {worst + 1} (rule <= {FP32_RTOL:g})")
        gn = [abs(rows[s]["grad_norm"] - ref["steps"][s]["grad_norm"]) / ref["steps"][s]["grad_norm"]
              for s in range(a.steps)]
        res.setdefault("grad_norm_rel_diff", {})[n] = gn
        print(f"  (info) grad norm, max relative difference {max(gn):.2e}")
    for k, t in enumerate(Tk):
        d1 = abs(t[0] - R[0])
        print(f"  (info) torch bf16 {floors[k]['attention']} step 1: |diff| {d1:.2e} vs 6 sigma_1 {Z * sig[0]:.2e}")


def check_bf16(a, gpt_runs, ref, floors, R, sig, Tk, tol, check):
    """--rule bf16 (the GPU): the derivation's self-check, step 1 and the curve per path, the paths pairwise,
    and the check's power (the loss must fall by many tolerances, or agreement would say nothing)."""
    for k, t in enumerate(Tk):
        d1 = abs(t[0] - R[0])
        check(f"derived bound holds for torch bf16 {floors[k]['attention']}", d1 <= Z * sig[0],
              f"step 1 |torch bf16 - fp32| = {d1:.2e} <= 6 sigma_1 = {Z * sig[0]:.2e}"
              if d1 <= Z * sig[0] else f"step 1 |torch bf16 - fp32| = {d1:.2e} > 6 sigma_1 = {Z * sig[0]:.2e}: "
              "the derived bound is invalid here, so the comparison of gpt is inconclusive")
    for n, rows in gpt_runs.items():
        G = [r["loss"] for r in rows]
        d1 = abs(G[0] - R[0])
        check(f"step-1 loss ({n})", d1 <= tol[0], f"|gpt - torch fp32| = {d1:.2e}, bound 6 sigma_1 = {tol[0]:.2e}")
        ratio = [abs(G[s] - R[s]) / tol[s] for s in range(a.steps)]
        worst = max(range(a.steps), key=lambda s: ratio[s])
        check(f"{a.steps}-step loss curve ({n})", all(math.isfinite(g) for g in G) and max(ratio) <= 1.0,
              f"worst step {worst + 1}: |gpt - torch fp32| = {abs(G[worst] - R[worst]):.2e}, tol {tol[worst]:.2e} "
              f"({max(ratio):.2f} of it)")
        g1 = rows[0]["grad_norm"] / ref["steps"][0]["grad_norm"]
        print(f"  (info) {n}: step-1 grad norm gpt / torch fp32 = {g1:.4f}")
    names = list(gpt_runs)
    for i, n in enumerate(names):
        for m in names[i + 1:]:
            r = [abs(gpt_runs[n][s]["loss"] - gpt_runs[m][s]["loss"]) / (math.sqrt(2) * tol[s]) for s in range(a.steps)]
            worst = max(range(a.steps), key=lambda s: r[s])
            check(f"attention {n} vs {m}", max(r) <= 1.0,
                  f"worst step {worst + 1}: |diff| = {r[worst] * math.sqrt(2) * tol[worst]:.2e}, "
                  f"sqrt(2) tol = {math.sqrt(2) * tol[worst]:.2e}")
    drop = R[0] - R[-1]
    power = drop / max(tol)
    check("power of the curve check", power >= POWER_MIN,
          f"torch fp32 loss falls {drop:.3f} over {a.steps} steps = {power:.0f} x the largest tolerance "
          f"(needs >= {POWER_MIN:g})")


def main():
    a = parse_args()
    os.makedirs(a.workdir, exist_ok=True)
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    log = Log(os.path.join(a.workdir, "gpu_correctness.log"))
    torch.set_num_threads(a.threads)
    dev = torch.device(a.device)
    if a.device == "cuda":
        # The reference is true fp32: no TF32 in matmuls or cuDNN. torch >= 2.9 has fp32_precision and
        # deprecates allow_tf32 (and mixing the two raises), so set the new one where it exists. Before 2.2
        # an unknown attribute of torch.backends.cuda.matmul raises AssertionError, not AttributeError.
        try:
            new_api = hasattr(torch.backends.cuda.matmul, "fp32_precision")
        except AssertionError:
            new_api = False
        if new_api:
            torch.backends.cuda.matmul.fp32_precision = "ieee"
            torch.backends.cudnn.fp32_precision = "ieee"
        else:
            torch.backends.cuda.matmul.allow_tf32 = False
            torch.backends.cudnn.allow_tf32 = False
    res = {"device": a.device, "rule": a.rule, "torch": torch.__version__, "L": a.L, "NH": a.NH, "C": a.C, "V": a.V,
           "maxT": a.seq_len, "B": a.B, "T": a.T, "steps": a.steps, "lr": a.lr, "warmup": a.warmup,
           "min_lr_frac": a.min_lr_frac, "u": U_BF16, "z": Z, "M": M_TRAJ, "notes": [], "checks": []}
    check = Checks(a, res)
    if a.device == "cuda":
        if not torch.cuda.is_available():
            check("torch sees the GPU", False, f"torch {torch.__version__} sees no CUDA GPU: nothing to compare with")
            check.finish()
        res["gpu"] = torch.cuda.get_device_name(0)
    if not prepare_tokens(a, log, root, check):
        check.finish()
    paths = attention_paths(a, log)
    res["attention_paths"] = paths
    print(f"gpu_correctness: L{a.L} NH{a.NH} C{a.C} V{a.V} B{a.B} T{a.T}, {a.steps} steps, lr {a.lr} warmup "
          f"{a.warmup}; gpt --device {a.device} --attention {'/'.join(paths)}; torch {torch.__version__}", flush=True)
    model_path = initial_model(a, log, res)
    gpt_runs = {}
    for path in paths:
        rows = run_gpt(a, log, path, model_path, check)
        if rows is not None:
            gpt_runs[path] = rows
    res["gpt"] = gpt_runs
    ref, floors = run_torch(a, model_path, dev, res)
    R, sig, Tk, tol = tolerances(a, ref, floors)
    res["tolerance"] = tol
    res["sigma_by_site_step1"] = ref["steps"][0]["sigma_by_site"]
    print_table(a, ref, floors, gpt_runs, R, sig, Tk, tol)
    for n, rows in gpt_runs.items():
        bad = [(s + 1, rows[s]["lr"], ref["steps"][s]["lr"]) for s in range(a.steps)
               if abs(rows[s]["lr"] - ref["steps"][s]["lr"]) > 1e-6 * abs(ref["steps"][s]["lr"]) + 1e-30]
        check(f"schedule replica ({n})", not bad,
              "gpt's lr equals torch_gpt2.lr_at at every step" if not bad else f"(step, gpt, ours) differ: {bad[:3]}")
    if a.rule == "fp32":
        check_fp32(a, gpt_runs, ref, floors, R, sig, Tk, check, res)
    else:
        check_bf16(a, gpt_runs, ref, floors, R, sig, Tk, tol, check)
    if not gpt_runs:
        check("gpt runs", False, "no gpt attention path completed")
    top = sorted(res["sigma_by_site_step1"].items(), key=lambda kv: -kv[1])[:4]
    print("  sigma_1 = %.2e; largest sites: %s" % (sig[0], ", ".join(f"{k} {v:.1e}" for k, v in top)))
    check.finish()


if __name__ == "__main__":
    main()
