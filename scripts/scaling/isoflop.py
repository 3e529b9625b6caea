#!/usr/bin/python3
"""Compute-optimal scaling at small scale: Chinchilla's IsoFLOP study (approach 2) and the parametric fit
L(N, D) = E + A/N^alpha + B/D^beta (approach 3), on ~27 MB of public-domain English at byte level.

For each compute budget C (exact training FLOPs, see below) a window of --sizes models from a ladder of
shapes is trained, each for D = C / (FLOPs per token) tokens, with its own cosine schedule ending at D
(warmup 5% of the steps, decay to --min-lr-frac of the peak), batch 4 x 128 tokens. The window is centred
where D/N = --tokens-per-param; when the lowest loss of a budget falls at an end of its window the window
is extended on that side (at most twice). The peak learning rate is chosen by a sweep at one size (the
lr_sweep runs, a parabola in ln lr through the best three) and carried to the other sizes by Kaplan et
al.'s rule (2001.08361, eq. D.1): lr(N) proportional to 0.003239 - 0.0001395 ln N (N non-embedding); two
lr_check runs (0.5x and 2x the rule) at the largest model of the sweep budget test that rule.

Counting (per token, forward; training = 3x forward):
  non-embedding    2 N                 N = L(12C^2 + 13C) + 2C
  attention        2 L T C             scores QK^T and the weighted sum of V, causal half (Kaplan's count)
  LM head          2 C Vp              Vp = 384, the padded vocabulary the logits matmul computes
C_exact = 3 (2N + 2LTC + 2CVp) D, against 6 N D; N_total = N + (Vp + T) C (what `gpt train` reports).

Outputs in OUT: isoflop.csv (every run), isoflop.png (the IsoFLOP curves), nopt_vs_c.png, frontier.png,
lnd_fit.png and results.md (scripts/scaling/isoflop_fit.py does the fits). --refit redoes the fits and plots
from OUT/isoflop.csv without training; --resume reuses the rows of OUT/isoflop.csv that succeeded.
The data is data/pd_english_byte (scripts/scaling/prepare_corpus.sh makes it); --quick uses Tiny
Shakespeare and tiny budgets instead (a smoke test of the whole pipeline, not a measurement).
"""
import math
import time
from pathlib import Path

import numpy as np

import common as c
import isoflop_fit as fit

NAME = "isoflop"
VP = 384  # padded byte vocabulary (257 -> multiple of 128)

# The size ladder: 2-layer models of growing width (non-embedding N from 1.8k to 0.4M, 1.2-2.2x apart).
# One depth keeps the family to one shape parameter: the lr rule below knows N but not depth, and in a
# first run a 3-layer model among 2-layer ones landed 0.2 nats above its neighbours.
LADDER = [(2, 8), (2, 12), (2, 16), (2, 20), (2, 24), (2, 28), (2, 32), (2, 40), (2, 48), (2, 56), (2, 64),
          (2, 80), (2, 96), (2, 128)]

FIELDS = ["phase", "budget", "L", "NH", "C", "N_nonembed", "N_total", "B", "T", "steps", "tokens", "epochs",
          "flops_per_token", "C_exact", "C_6ND_nonembed", "C_6ND_total", "lr", "warmup", "min_lr_frac", "seed",
          "val_batches", "final_train_loss", "val_loss", "seconds", "tokens_per_s", "status"]


def heads(d):
    """Heads of about 16 channels up to d_model 80, 32 above; one head below 32; always a divisor of d."""
    h = max(1, d // 16 if d <= 80 else d // 32)
    while d % h:
        h -= 1
    return h


def n_nonembed(L, d):
    return L * (12 * d * d + 13 * d) + 2 * d


def n_total(L, d, T):
    return n_nonembed(L, d) + (VP + T) * d


def flops_per_token(L, d, T):
    """Training FLOPs per token, exact count: 3 x (2N + 2LTC + 2C Vp)."""
    return 3 * (2 * n_nonembed(L, d) + 2 * L * T * d + 2 * d * VP)


def kaplan_lr(lr_ref, n_ref, n):
    """Kaplan et al. eq. D.1, normalised to lr_ref at n_ref."""
    f = lambda x: 0.003239 - 0.0001395 * math.log(x)  # noqa: E731
    return lr_ref * f(n) / f(n_ref)


def parse():
    p = c.base_parser(NAME, __doc__.splitlines()[0])
    p.add_argument("--data", default=None, help="folder with train_*.bin and val_*.bin (default "
                   "data/pd_english_byte; quick: Tiny Shakespeare, tokenized on first use)")
    p.add_argument("--budgets", default=None, help="compute budgets in exact training FLOPs (default "
                   "2e11,4.5e11,9e11,2e12; quick 3e9,6e9,1.2e10)")
    p.add_argument("--sweep-budget", type=float, default=None,
                   help="budget of the lr sweep (default the second largest of --budgets)")
    p.add_argument("--sizes", type=int, default=None, help="models per budget (default 7, quick 4)")
    p.add_argument("--tokens-per-param", type=float, default=400.0,
                   help="where each budget's ladder is centred: D/N at the guessed optimum (default 400, "
                        "what pilots at these budgets found; Chinchilla's 20 is far too few here)")
    p.add_argument("-B", type=int, default=None, help="micro-batch (default 4, quick 4)")
    p.add_argument("-T", type=int, default=None, help="sequence length = context (default 128, quick 64)")
    p.add_argument("--lr", type=float, default=None, help="peak lr at the sweep size: skips the sweep")
    p.add_argument("--lr-sweep", default=None, help="peak lrs of the sweep, extended by factors of 2 while the best is at an "
                   "end (default 1e-3,2e-3,4e-3; quick 4e-3,1.6e-2)")
    p.add_argument("--sweep-model", default=None,
                   help="L:C of the lr sweep's model (default 2:28, N = 19,600, near the sweep budget's optimum; "
                        "quick: the ladder size nearest the sweep budget's guessed optimum)")
    p.add_argument("--min-lr-frac", type=float, default=0.1, help="cosine floor as a fraction of the peak (0.1)")
    p.add_argument("--warmup-frac", type=float, default=0.05, help="warmup as a fraction of the steps (0.05)")
    p.add_argument("--min-steps", type=int, default=None, help="sizes with fewer steps are left out (default 60, quick 5)")
    p.add_argument("--val-batches", type=int, default=None, help="validation batches of B x T at the end (default 256, quick 8)")
    p.add_argument("--seed", type=int, default=1337, help="seed of every run (default 1337)")
    p.add_argument("--threads", type=int, default=2, help="OpenMP/OpenBLAS threads (default 2)")
    p.add_argument("--bootstrap", type=int, default=None, help="bootstrap resamples (default 2000, quick 50)")
    p.add_argument("--resume", action="store_true", help="reuse the successful rows of OUT/isoflop.csv")
    p.add_argument("--refit", action="store_true", help="no training: fits and plots from OUT/isoflop.csv")
    a = p.parse_args()
    q = a.quick
    a.budgets = [float(x) for x in (a.budgets or ("3e9,6e9,1.2e10" if q else "2e11,4.5e11,9e11,2e12")).split(",")]
    if len(a.budgets) < 2 or any(b <= 0 for b in a.budgets):
        raise c.UserError("--budgets: expected at least two positive FLOP counts")
    a.budgets.sort()
    a.sizes = a.sizes or (4 if q else 7)
    a.B = a.B or 4
    a.T = a.T or (64 if q else 128)
    a.val_batches = a.val_batches or (8 if q else 256)
    a.min_steps = a.min_steps if a.min_steps is not None else (5 if q else 60)
    a.bootstrap = a.bootstrap or (50 if q else 2000)
    a.lr_sweep = [float(x) for x in (a.lr_sweep or ("4e-3,1.6e-2" if q else "1e-3,2e-3,4e-3")).split(",")]
    sm = a.sweep_model or (None if q else "2:28")
    if sm:
        try:
            a.sweep_model = tuple(int(x) for x in sm.split(":"))
            assert len(a.sweep_model) == 2 and min(a.sweep_model) >= 1
        except (ValueError, AssertionError):
            raise c.UserError(f"--sweep-model: expected L:C with positive integers, got '{sm}'")
    if a.sizes < 3:
        raise c.UserError("--sizes: a parabola needs at least 3 models per budget")
    if a.sizes > len(LADDER):
        raise c.UserError(f"--sizes: at most {len(LADDER)} (the ladder's length)")
    for flag, v in (("-B", a.B), ("-T", a.T), ("--val-batches", a.val_batches), ("--threads", a.threads)):
        if v < 1:
            raise c.UserError(f"{flag}: expected >= 1, got {v}")
    if not (0 <= a.min_lr_frac <= 1 and 0 <= a.warmup_frac < 1):
        raise c.UserError("--min-lr-frac must be in [0, 1] and --warmup-frac in [0, 1)")
    if a.lr is not None and a.lr <= 0 or any(x <= 0 for x in a.lr_sweep):
        raise c.UserError("learning rates must be > 0")
    return a


def steps_at(budget, i, a):
    L, d = LADDER[i]
    return round(budget / (flops_per_token(L, d, a.T) * a.B * a.T))


def centre_index(budget, a):
    """Ladder index nearest the guessed optimum: D = k N with C = 6 N D x (exact / 6ND) ~ 6 k N^2 x 1.6."""
    guess = math.sqrt(budget / (6 * a.tokens_per_param * 1.6))
    return int(np.argmin([abs(math.log(n_nonembed(L, d) / guess)) for L, d in LADDER]))


class Runner:
    def __init__(self, a, gpt, data, out):
        self.a, self.gpt, self.data, self.out = a, gpt, data, out
        self.rows = []
        self.cache = {}
        if a.resume:
            for r in c.read_csv(out / f"{NAME}.csv"):
                if r.get("status") == "ok":
                    self.cache[self.key(r["phase"], int(r["L"]), int(r["C"]), int(r["steps"]), float(r["lr"]))] = r
        self.tmp = c.scratch(NAME)
        self.log = Path(self.tmp) / "runs.log"

    def key(self, phase, L, d, steps, lr):
        return (phase, L, d, steps, f"{lr:.6g}")

    def run(self, phase, budget, L, d, lr):
        a = self.a
        fpt = flops_per_token(L, d, a.T)
        per_step = a.B * a.T
        steps = max(1, round(budget / (fpt * per_step)))
        tokens = steps * per_step
        N, Nt = n_nonembed(L, d), n_total(L, d, a.T)
        row = {"phase": phase, "budget": f"{budget:.3g}", "L": L, "NH": heads(d), "C": d, "N_nonembed": N,
               "N_total": Nt, "B": a.B, "T": a.T, "steps": steps, "tokens": tokens,
               "epochs": f"{tokens / self.data[2]:.3f}", "flops_per_token": fpt, "C_exact": f"{fpt * tokens:.6g}",
               "C_6ND_nonembed": f"{6 * N * tokens:.6g}", "C_6ND_total": f"{6 * Nt * tokens:.6g}",
               "lr": f"{lr:.6g}", "warmup": max(1, round(a.warmup_frac * steps)) if a.warmup_frac > 0 else 0,
               "min_lr_frac": a.min_lr_frac, "seed": a.seed, "val_batches": a.val_batches}
        k = self.key(phase, L, d, steps, lr)
        if k in self.cache:
            old = self.cache[k]
            for f in ("final_train_loss", "val_loss", "seconds", "tokens_per_s", "status"):
                row[f] = old[f]
            row["status"] = "ok"
            self.rows.append(row)
            c.progress(f"[{phase} {budget:.3g}] L={L} C={d}: reused val {row['val_loss']}")
            return row
        metrics = Path(self.tmp) / f"{phase}_{budget:.3g}_{L}_{d}_{lr:.3g}.jsonl"
        train, val, _ = self.data
        argv = [self.gpt, "train", "--n-layer", str(L), "--n-head", str(heads(d)), "--d-model", str(d),
                "--vocab", str(c.BYTE_VOCAB), "--seq-len", str(a.T), "--tokenizer", "byte", "--train", train,
                "--val", val, "-B", str(a.B), "-T", str(a.T), "--steps", str(steps), "--lr", f"{lr:.6g}",
                "--warmup", str(row["warmup"]), "--min-lr-frac", str(a.min_lr_frac), "--seed", str(a.seed),
                "--val-every", str(steps), "--val-batches", str(a.val_batches), "--sample-tokens", "0",
                "--device", "cpu", "--quiet", "--metrics", str(metrics)]
        rc, dt, outp = c.run(argv, c.mpi_env(a.threads), a.timeout, self.log)
        m = c.read_metrics(metrics)
        vals = [r["val_loss"] for r in m if "val_loss" in r]
        row["seconds"] = f"{dt:.1f}"
        if rc != 0 or not vals or not math.isfinite(vals[-1]):
            row["status"] = f"failed (rc {rc}): {c.last_error_line(outp)}"
        else:
            row["final_train_loss"] = f"{m[-1]['loss']:.4f}"
            row["val_loss"] = f"{vals[-1]:.5f}"
            row["tokens_per_s"] = f"{np.median([r['tokens_per_s'] for r in m]):.0f}"
            row["status"] = "ok"
        self.rows.append(row)
        c.write_csv(self.out / f"{NAME}.csv", self.rows, FIELDS)
        c.progress(f"[{phase} {budget:.3g}] L={L} C={d} N={N:,} steps={steps} lr={lr:.3g}: "
                   f"val {row.get('val_loss', 'n/a')} in {dt:.0f} s ({row['status']})")
        return row


def best_lr(rows):
    """Peak lr minimising val loss: a parabola in log lr through the best point and its neighbours."""
    ok = sorted((float(r["lr"]), float(r["val_loss"])) for r in rows if r["status"] == "ok")
    if not ok:
        raise c.UserError("the lr sweep has no successful run")
    i = int(np.argmin([l for _, l in ok]))
    if 0 < i < len(ok) - 1:
        x = np.log([ok[j][0] for j in (i - 1, i, i + 1)])
        y = [ok[j][1] for j in (i - 1, i, i + 1)]
        cf = np.polyfit(x, y, 2)
        if cf[0] > 0:
            return float(np.exp(np.clip(-cf[1] / (2 * cf[0]), x[0], x[2]))), i
    return ok[i][0], i


def study(a, gpt, out):
    if a.quick and not a.data:
        tr, va = c.ensure_byte_data(gpt)
    else:
        d = Path(a.data) if a.data else c.REPO / "data" / "pd_english_byte"
        if not (list(d.glob("train_*.bin")) and list(d.glob("val_*.bin"))):
            raise c.UserError(f"{d}: no train_*.bin / val_*.bin (run scripts/scaling/prepare_corpus.sh first)")
        tr, va = str(d / "train_*.bin"), str(d / "val_*.bin")
    ntrain = sum((Path(f).stat().st_size - 1024) // 2 for f in sorted(Path(tr).parent.glob(Path(tr).name)))
    R = Runner(a, gpt, (tr, va, ntrain), out)
    t0 = time.time()

    # 1. learning rate: a sweep at one size (the guessed optimum of the sweep budget), then Kaplan's rule
    sweep_budget = a.sweep_budget or a.budgets[-2]
    L0, d0 = a.sweep_model or LADDER[centre_index(sweep_budget, a)]
    n_ref = n_nonembed(L0, d0)
    if a.lr is not None:
        lr_ref = a.lr
    else:
        grid = list(a.lr_sweep)
        sweep = [R.run("lr_sweep", sweep_budget, L0, d0, lr) for lr in grid]
        for _ in range(3):  # extend the grid when the best lr is at an end
            lr_ref, i = best_lr(sweep)
            ok = sorted(float(r["lr"]) for r in sweep if r["status"] == "ok")
            if i == 0 and len(ok) > 1:
                sweep.append(R.run("lr_sweep", sweep_budget, L0, d0, ok[0] * ok[0] / ok[1]))
            elif i == len(ok) - 1 and len(ok) > 1:
                sweep.append(R.run("lr_sweep", sweep_budget, L0, d0, ok[-1] * ok[-1] / ok[-2]))
            else:
                break
        lr_ref, _ = best_lr(sweep)
    c.progress(f"peak lr {lr_ref:.4g} at N = {n_ref:,} (L={L0} C={d0}); other sizes by Kaplan's eq. D.1")
    lr_of = lambda L, d: kaplan_lr(lr_ref, n_ref, n_nonembed(L, d))  # noqa: E731

    # 2. the IsoFLOP grid
    for budget in a.budgets:
        ci = centre_index(budget, a)
        # the ladder's sizes that get at least --min-steps steps at this budget, a window of --sizes of
        # them centred on the guess
        top = max(i for i in range(len(LADDER)) if i == 0 or steps_at(budget, i, a) >= a.min_steps)
        lo = max(0, min(ci - a.sizes // 2, top + 1 - a.sizes))
        idx = list(range(lo, min(lo + a.sizes, top + 1)))
        done = {}

        def run_idx(i):
            L, d = LADDER[i]
            steps = steps_at(budget, i, a)
            if steps < a.min_steps:
                c.progress(f"[isoflop {budget:.3g}] L={L} C={d}: {steps} steps < --min-steps {a.min_steps}, left out")
                return None
            done[i] = R.run("isoflop", budget, L, d, lr_of(L, d))
            return done[i]

        for i in idx:
            run_idx(i)
        for _ in range(2):
            ok = {i: float(r["val_loss"]) for i, r in done.items() if r and r["status"] == "ok"}
            if len(ok) < 3:
                break
            best = min(ok, key=ok.get)
            if best == min(ok) and best > 0:
                if run_idx(best - 1) is None:
                    break
            elif best == max(ok) and best < len(LADDER) - 1:
                if run_idx(best + 1) is None:
                    break
            else:
                break

    # 3. a check of the lr rule at the largest model of the sweep budget (0.5x, 1x, 2x the rule's lr)
    if a.lr is None:
        ci = centre_index(sweep_budget, a)
        cands = [r for r in R.rows if r["phase"] == "isoflop" and r["budget"] == f"{sweep_budget:.3g}"
                 and r["status"] == "ok"]
        if cands:
            big = max(cands, key=lambda r: int(r["N_nonembed"]))
            L1, d1 = int(big["L"]), int(big["C"])
            for f in (0.5, 2.0):
                R.run("lr_check", sweep_budget, L1, d1, lr_of(L1, d1) * f)
    c.finish_scratch(R.tmp, R.rows)
    c.progress(f"training done in {time.time() - t0:.0f} s")
    return R.rows, {"lr_ref": lr_ref, "n_ref": n_ref, "ref_shape": (L0, d0), "wall_s": time.time() - t0}


def main():
    a = parse()
    out = c.out_dir(a, NAME)
    if a.refit:
        rows = c.read_csv(out / f"{NAME}.csv")
        if not rows:
            raise c.UserError(f"--refit: {out / (NAME + '.csv')} has no rows")
        meta = fit.meta_from_rows(rows)
    else:
        gpt = c.check_gpt(a.gpt)
        rows, meta = study(a, gpt, out)
        c.write_csv(out / f"{NAME}.csv", rows, FIELDS)
        (out / "command.txt").write_text(c.command_line() + "\n")
    meta["command"] = c.command_line()
    cmd = out / "command.txt"
    meta["study_command"] = cmd.read_text().strip() if cmd.is_file() else None
    fit.analyse(rows, out, a, meta)
    c.progress(f"wrote {out}/{NAME}.csv, {NAME}.png, nopt_vs_c.png, frontier.png, lnd_fit.png, results.md")


if __name__ == "__main__":
    c.main_guard(main)
