#!/usr/bin/python3
"""Compute-optimal scaling at small scale: Chinchilla's IsoFLOP study (approach 2) and the parametric fit
L(N, D) = E + A/N^alpha + B/D^beta (approach 3), on ~27 MB of public-domain English at byte level.

For each compute budget C (exact training FLOPs, see below) a window of --sizes models from a ladder of
2-layer shapes is trained, each for D = C / (FLOPs per token) tokens, with its own cosine schedule ending at D
(warmup 5% of the steps, decay to --min-lr-frac of the peak), batch 4 x 128 tokens, AdamW with --beta2 0.99,
heads of 8 channels, weight matrices drawn by `gpt train --init width` (--init), --seeds for every size (the
second and later only up to --seeds-below FLOPs, if given).
The window is centred where D/N_total = --tokens-per-param; sizes that would train on fewer than --min-tokens
tokens are left out (below about 1.8M bytes these models are still on a loss plateau whose end falls at a
point set by chance, so such runs scatter by 0.1 to 0.2 nats); when the lowest loss of a budget falls at an
end of its window the window is extended on that side (at most twice). The peak learning rate is swept at two
sizes (--sweep: a small and a large model, each at a budget near its optimum; each optimum a parabola in
ln lr through the best run and its neighbours) and carried to every size by Kaplan's eq. D.1, its level
fitted to both optima (see lr_rule); two lr_check runs (0.5x and 2x the rule) at the middle budget's centre
model test it.
Runs go --jobs at a time with --threads each: these models are too small for a second thread to speed one.

Counting (per token, forward; training = 3x forward):
  non-embedding    2 N                 N = L(12C^2 + 13C) + 2C
  attention        2 L T C             scores QK^T and the weighted sum of V, causal half (Kaplan's count)
  LM head          2 C Vp              Vp = 384, the padded vocabulary the logits matmul computes
C_exact = 3 (2N + 2LTC + 2CVp) D, against 6 N D; N_total = N + (Vp + T) C (what `gpt train` reports). The
headline counts as Chinchilla did (N_total, C exact); the report gives the other conventions beside it.

Outputs in OUT: isoflop.csv (every run), isoflop.png (the IsoFLOP curves), nopt_vs_c.png, frontier.png,
lnd_fit.png and results.md (isoflop_fit.py fits, isoflop_plots.py draws, isoflop_report.py writes). --refit
redoes the fits and plots from OUT/isoflop.csv without training; --resume reuses the rows of OUT/isoflop.csv
that succeeded. The data is data/pd_english_byte (scripts/scaling/prepare_corpus.sh makes it); --quick uses
Tiny Shakespeare and tiny budgets instead (a smoke test of the whole pipeline, not a measurement).
"""
import math
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

import common as c
import isoflop_fit as fit
import isoflop_report as report
from corpus_text import CORPUS_VERSION

NAME = "isoflop"
VP = 384  # padded byte vocabulary (257 -> multiple of 128)
DEFAULT_BUDGETS = "1.25e12,2.7e12,5.8e12,1.25e13"
QUICK_BUDGETS = "3e9,6e9,1.2e10"

# The size ladder: 2-layer models of growing width, every head 8 channels wide (so a width is a multiple of 8).
# One depth and one head size keep the family to one shape parameter: the lr rule knows N but not the shape,
# and in an earlier run a 3-layer model among 2-layer ones landed 0.2 nats above its neighbours, and widths
# whose heads were 12 to 32 channels wide scattered by up to 0.09 nats, the same for both seeds.
HEAD_SIZE = 8
LADDER = [(2, w) for w in (8, 16, 24, 32, 40, 48, 56, 64, 72, 80, 96, 112, 128, 144, 160)]

FIELDS = ["phase", "budget", "L", "NH", "C", "N_nonembed", "N_total", "B", "T", "steps", "tokens", "epochs",
          "flops_per_token", "C_exact", "C_6ND_nonembed", "C_6ND_total", "lr", "beta2", "init", "warmup", "min_lr_frac", "seed", "threads",
          "val_batches", "final_train_loss", "val_loss", "seconds", "tokens_per_s", "status"]


def heads(d):
    return max(1, d // HEAD_SIZE)


def n_nonembed(L, d):
    return L * (12 * d * d + 13 * d) + 2 * d


def n_total(L, d, T):
    return n_nonembed(L, d) + (VP + T) * d


def flops_per_token(L, d, T):
    """Training FLOPs per token, exact count: 3 x (2N + 2LTC + 2C Vp)."""
    return 3 * (2 * n_nonembed(L, d) + 2 * L * T * d + 2 * d * VP)


def parse():
    p = c.base_parser(NAME, __doc__.splitlines()[0])
    p.add_argument("--data", default=None, help="folder with train_*.bin and val_*.bin (default "
                   "data/pd_english_byte; quick: Tiny Shakespeare, tokenized on first use)")
    p.add_argument("--budgets", default=None, help="compute budgets in exact training FLOPs (default "
                   f"{DEFAULT_BUDGETS}; quick {QUICK_BUDGETS})")
    p.add_argument("--sizes", type=int, default=None, help="models per budget (default 7, quick 4)")
    p.add_argument("--tokens-per-param", type=float, default=None,
                   help="where each budget's window is centred: D / N_total at the guessed optimum (default 100, "
                        "near what the previous study's vertices found; Chinchilla's 20 is far too few here)")
    p.add_argument("-B", type=int, default=None, help="micro-batch (default 4, quick 4)")
    p.add_argument("-T", type=int, default=None, help="sequence length = context (default 128, quick 64)")
    p.add_argument("--lr", type=float, default=None, help="peak lr at the first --sweep model: skips the sweeps "
                   "(other sizes by the same rule)")
    p.add_argument("--lr-sweep", default=None, help="peak lrs of each sweep, extended by factors of 2 while the best is "
                   "at an end (default 2.5e-3,3.5e-3,5e-3,7e-3,1e-2,1.4e-2; quick 4e-3,1.6e-2)")
    p.add_argument("--sweep", default=None,
                   help="the lr sweeps' models and budgets, L:C@FLOPs,... (default 2:16@5e11,2:56@2.7e12: a small and a "
                        "large model, each at a budget near its optimum; quick: 2:8 and 2:16 at the first and last budgets)")
    p.add_argument("--beta2", type=float, default=0.99, help="AdamW beta2 (default 0.99: at 512-token batches "
                   "0.95 averages the second moment over too few steps; Porian et al. 2024)")
    p.add_argument("--init", default="width", choices=["width", "gpt2"],
                   help="gpt train --init (default width: matrices N(0, 0.02 sqrt(768/C)); with GPT-2's fixed 0.02 "
                        "these widths leave the early plateau at a step set by the seed, and single runs moved by "
                        "up to 0.11 nats between seeds; see notes.md)")
    p.add_argument("--min-lr-frac", type=float, default=0.1, help="cosine floor as a fraction of the peak (0.1)")
    p.add_argument("--warmup-frac", type=float, default=0.05, help="warmup as a fraction of the steps (0.05)")
    p.add_argument("--min-steps", type=int, default=None, help="sizes with fewer steps are left out (default 60, quick 5)")
    p.add_argument("--min-tokens", type=float, default=None, help="sizes trained on fewer tokens are left out "
                   "(default 2e6: below about 1.8M bytes these models still sit on a plateau whose end falls at "
                   "a point set by chance, see notes.md; quick 0)")
    p.add_argument("--val-batches", type=int, default=None, help="validation batches of B x T at the end (default 256, quick 8)")
    p.add_argument("--seeds", default=None, help="seeds of every IsoFLOP run, each a separate run and point of "
                   "its parabola (default 1337; quick 1337); the lr sweeps and checks use the first")
    p.add_argument("--seeds-below", type=float, default=None, help="the second and later --seeds run only at "
                   "budgets up to this many FLOPs (default: at every budget); the shortest runs are the noisiest "
                   "and the cheapest")
    p.add_argument("--jobs", type=int, default=2, help="runs at once (default 2: one per core; these models are too "
                   "small for two threads to help one run)")
    p.add_argument("--threads", type=int, default=1, help="OpenMP/OpenBLAS threads per run (default 1)")
    p.add_argument("--bootstrap", type=int, default=None, help="bootstrap resamples (default 2000, quick 50)")
    p.add_argument("--resume", action="store_true", help="reuse the successful rows of OUT/isoflop.csv")
    p.add_argument("--refit", action="store_true", help="no training: fits and plots from OUT/isoflop.csv")
    a = p.parse_args()
    q = a.quick
    a.budgets = [float(x) for x in (a.budgets or (QUICK_BUDGETS if q else DEFAULT_BUDGETS)).split(",")]
    if len(a.budgets) < 2 or any(b <= 0 for b in a.budgets):
        raise c.UserError("--budgets: expected at least two positive FLOP counts")
    a.budgets.sort()
    a.sizes = a.sizes or (4 if q else 7)
    parse_seeds(a)
    a.tokens_per_param = a.tokens_per_param or 100.0
    a.B = a.B or 4
    a.T = a.T or (64 if q else 128)
    a.val_batches = a.val_batches or (8 if q else 256)
    a.min_steps = a.min_steps if a.min_steps is not None else (5 if q else 60)
    a.min_tokens = a.min_tokens if a.min_tokens is not None else (0 if q else 2e6)
    if a.min_steps < 1 or a.min_tokens < 0:
        raise c.UserError("--min-steps must be >= 1 and --min-tokens >= 0")
    a.bootstrap = a.bootstrap or (50 if q else 2000)
    a.lr_sweep = [float(x) for x in (a.lr_sweep or ("4e-3,1.6e-2" if q else "2.5e-3,3.5e-3,5e-3,7e-3,1e-2,1.4e-2")).split(",")]
    if a.sizes < 3:
        raise c.UserError("--sizes: a parabola needs at least 3 models per budget")
    if a.sizes > len(LADDER):
        raise c.UserError(f"--sizes: at most {len(LADDER)} (the ladder's length)")
    for flag, v in (("-B", a.B), ("-T", a.T), ("--val-batches", a.val_batches), ("--threads", a.threads),
                    ("--jobs", a.jobs)):
        if v < 1:
            raise c.UserError(f"{flag}: expected >= 1, got {v}")
    if not (0 <= a.min_lr_frac <= 1 and 0 <= a.warmup_frac < 1):
        raise c.UserError("--min-lr-frac must be in [0, 1] and --warmup-frac in [0, 1)")
    if not 0 <= a.beta2 < 1:
        raise c.UserError(f"--beta2: expected a value in [0, 1), got {a.beta2}")
    if a.tokens_per_param <= 0:
        raise c.UserError("--tokens-per-param: expected > 0")
    if a.lr is not None and a.lr <= 0 or any(x <= 0 for x in a.lr_sweep):
        raise c.UserError("learning rates must be > 0")
    a.sweep = parse_sweep(a.sweep or (f"2:8@{a.budgets[0]:g},2:16@{a.budgets[-1]:g}" if q else None), a)
    return a


def parse_seeds(a):
    try:
        a.seeds = [int(x) for x in (a.seeds or "1337").split(",")]
    except ValueError:
        raise c.UserError(f"--seeds: expected comma-separated integers, got '{a.seeds}'")
    if len(set(a.seeds)) != len(a.seeds) or any(x < 0 for x in a.seeds):
        raise c.UserError("--seeds: expected distinct non-negative integers")
    if a.seeds_below is not None:
        if len(a.seeds) < 2:
            raise c.UserError("--seeds-below: needs at least two --seeds (it limits the second and later)")
        if not any(len(seeds_at(b, a)) > 1 for b in a.budgets):
            raise c.UserError(f"--seeds-below: no budget is at or below {a.seeds_below:g} FLOPs")


def seeds_at(budget, a):
    """The seeds a budget's IsoFLOP runs use: every --seeds, or only the first above --seeds-below."""
    if a.seeds_below is None or budget <= a.seeds_below * (1 + 1e-9):
        return a.seeds
    return a.seeds[:1]


def parse_sweep(text, a):
    """--sweep L:C@FLOPs,...: the lr sweeps' models (at most two distinct sizes are needed for the power law)."""
    out = []
    for item in (text or "2:16@5e11,2:56@2.7e12").split(","):
        try:
            shape, b = item.split("@")
            L, d = (int(x) for x in shape.split(":"))
            b = float(b)
            assert L >= 1 and d >= HEAD_SIZE and b > 0 and d % HEAD_SIZE == 0
        except (ValueError, AssertionError):
            raise c.UserError(f"--sweep: expected L:C@FLOPs items such as 2:16@5e11 (C a multiple of {HEAD_SIZE}), "
                          f"got '{item}'")
        out.append((L, d, b))
    return out


def steps_at(budget, i, a):
    L, d = LADDER[i]
    return round(budget / (flops_per_token(L, d, a.T) * a.B * a.T))


def long_enough(budget, i, a):
    """Whether ladder size i gets at least --min-steps steps and --min-tokens tokens at this budget."""
    steps = steps_at(budget, i, a)
    return steps >= a.min_steps and steps * a.B * a.T >= a.min_tokens


def centre_index(budget, a):
    """Ladder index nearest the guessed optimum, where D = k N_total: the budget that makes each size optimal
    is C_i = (FLOPs per token)_i x k x N_total_i, and the nearest C_i in log wins."""
    ci = [flops_per_token(L, d, a.T) * a.tokens_per_param * n_total(L, d, a.T) for L, d in LADDER]
    return int(np.argmin([abs(math.log(x / budget)) for x in ci]))


class Runner:
    def __init__(self, a, gpt, data, out):
        self.a, self.gpt, self.data, self.out = a, gpt, data, out
        self.rows = []
        self.cache = {}
        if a.resume:
            for r in c.read_csv(out / f"{NAME}.csv"):
                if r.get("status") == "ok":
                    self.cache[self.key(r["phase"], int(r["L"]), int(r["C"]), int(r["steps"]), float(r["lr"]),
                                        int(r["seed"]), r.get("init") or "gpt2")] = r
        self.tmp = c.scratch(NAME)
        self.log = Path(self.tmp) / "runs.log"
        self.lock = threading.Lock()  # guards rows, the CSV and the log (runs finish on --jobs threads)

    def key(self, phase, L, d, steps, lr, seed, init):
        return (phase, L, d, steps, f"{lr:.6g}", seed, init)

    def run_many(self, specs):
        """Runs [(phase, budget, L, d, lr[, seed])] on --jobs processes at once, the costliest first (so the batch's
        tail is short); returns the rows in the order of specs."""
        cost = lambda s: s[1] / (flops_per_token(s[2], s[3], self.a.T) * self.a.B * self.a.T) * s[3]  # noqa: E731
        order = sorted(range(len(specs)), key=lambda i: -cost(specs[i]))
        with ThreadPoolExecutor(max_workers=self.a.jobs) as ex:
            futs = {i: ex.submit(self.run, *specs[i]) for i in order}
            return [futs[i].result() for i in range(len(specs))]

    def run(self, phase, budget, L, d, lr, seed=None):
        a = self.a
        seed = a.seeds[0] if seed is None else seed
        fpt = flops_per_token(L, d, a.T)
        per_step = a.B * a.T
        steps = max(1, round(budget / (fpt * per_step)))
        tokens = steps * per_step
        N, Nt = n_nonembed(L, d), n_total(L, d, a.T)
        row = {"phase": phase, "budget": f"{budget:.3g}", "L": L, "NH": heads(d), "C": d, "N_nonembed": N,
               "N_total": Nt, "B": a.B, "T": a.T, "steps": steps, "tokens": tokens,
               "epochs": f"{tokens / self.data[2]:.3f}", "flops_per_token": fpt, "C_exact": f"{fpt * tokens:.6g}",
               "C_6ND_nonembed": f"{6 * N * tokens:.6g}", "C_6ND_total": f"{6 * Nt * tokens:.6g}",
               "lr": f"{lr:.6g}", "beta2": a.beta2, "init": a.init, "warmup": max(1, round(a.warmup_frac * steps)) if a.warmup_frac > 0 else 0,
               "min_lr_frac": a.min_lr_frac, "seed": seed, "threads": a.threads, "val_batches": a.val_batches}
        k = self.key(phase, L, d, steps, lr, seed, a.init)
        if k in self.cache:
            old = self.cache[k]
            for f in ("final_train_loss", "val_loss", "seconds", "tokens_per_s", "status"):
                row[f] = old[f]
            row["status"] = "ok"
            with self.lock:
                self.rows.append(row)
            c.progress(f"[{phase} {budget:.3g}] L={L} C={d}: reused val {row['val_loss']}")
            return row
        metrics = Path(self.tmp) / f"{phase}_{budget:.3g}_{L}_{d}_{lr:.3g}_s{seed}.jsonl"
        train, val, _ = self.data
        argv = [self.gpt, "train", "--n-layer", str(L), "--n-head", str(heads(d)), "--d-model", str(d),
                "--vocab", str(c.BYTE_VOCAB), "--seq-len", str(a.T), "--tokenizer", "byte", "--train", train,
                "--val", val, "-B", str(a.B), "-T", str(a.T), "--steps", str(steps), "--lr", f"{lr:.6g}",
                "--beta2", str(a.beta2), "--init", a.init,
                "--warmup", str(row["warmup"]), "--min-lr-frac", str(a.min_lr_frac), "--seed", str(seed),
                "--val-every", str(steps), "--val-batches", str(a.val_batches), "--sample-tokens", "0",
                "--device", "cpu", "--quiet", "--metrics", str(metrics)]
        rc, dt, outp = c.run(argv, c.mpi_env(a.threads), a.timeout)
        with self.lock:
            with open(self.log, "a") as f:
                f.write("$ " + " ".join(argv) + f"\n# rc={rc} seconds={dt:.1f}\n{outp}\n")
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
        with self.lock:
            self.rows.append(row)
            c.write_csv(self.out / f"{NAME}.csv", self.rows, FIELDS)
        c.progress(f"[{phase} {budget:.3g}] L={L} C={d} N={N:,} steps={steps} lr={lr:.3g}: "
                   f"val {row.get('val_loss', 'n/a')} in {dt:.0f} s ({row['status']})")
        return row


def lr_rule(points):
    """The peak-lr rule from the sweeps' optima [(L, d, budget, N_total, lr)]: Kaplan's eq. D.1 shape,
    lr ∝ 0.003239 - 0.0001395 ln N (N non-embedding, as Kaplan counted), its level the least-squares fit in
    ln lr to every optimum. Why one free level and not a power law through the optima: each sweep's loss is
    flat within the runs' noise over a wide range of lr, so a free exponent would fit noise (it is reported
    beside the rule). Returns (lr_of(L, d), that free exponent k of lr ∝ N_total^-k, or None)."""
    f = lambda L, d: 0.003239 - 0.0001395 * math.log(n_nonembed(L, d))  # noqa: E731
    level = float(np.exp(np.mean([math.log(p[4] / f(p[0], p[1])) for p in points])))
    return (lambda L, d: level * f(L, d)), fit.free_lr_exponent(points)


def sweep_lr(R, specs, a):
    """Runs every sweep model over the lr grid (in one parallel batch), extends each grid by factors of 2 while
    its best lr is at an end (at most three rounds), and returns [(L, d, budget, N_total, best lr)]."""
    batch = [("lr_sweep", b, L, d, lr) for (L, d, b) in specs for lr in a.lr_sweep]
    rows = R.run_many(batch)
    res = {s: [r for r, spec in zip(rows, batch) if (spec[2], spec[3], spec[1]) == s] for s in specs}
    for _ in range(3):
        more = []
        for (L, d, b), sw in res.items():
            _, i = fit.best_lr(sw)
            ok = sorted(float(r["lr"]) for r in sw if r["status"] == "ok")
            if len(ok) > 1 and i == 0:
                more.append(("lr_sweep", b, L, d, ok[0] * ok[0] / ok[1]))
            elif len(ok) > 1 and i == len(ok) - 1:
                more.append(("lr_sweep", b, L, d, ok[-1] * ok[-1] / ok[-2]))
        if not more:
            break
        for spec, r in zip(more, R.run_many(more)):
            res[(spec[2], spec[3], spec[1])].append(r)
    return [(L, d, b, n_total(L, d, a.T), fit.best_lr(sw)[0]) for (L, d, b), sw in res.items()]


def window(budget, a):
    """The ladder indices of one budget's first window: --sizes models centred on the guessed optimum, among
    those that get at least --min-steps steps and --min-tokens tokens."""
    ci = centre_index(budget, a)
    top = max(i for i in range(len(LADDER)) if i == 0 or long_enough(budget, i, a))
    lo = max(0, min(ci - a.sizes // 2, top + 1 - a.sizes))
    return list(range(lo, min(lo + a.sizes, top + 1)))


def isoflop_grid(R, a, lr_of):
    """Every budget's window in one parallel batch (each size once per seed of seeds_at), then up to two rounds
    that add the neighbour of any budget whose lowest mean loss sits at an end of its window."""
    done = {b: {} for b in a.budgets}

    def run(pairs):
        pairs = [(b, i) for b, i in pairs if long_enough(b, i, a) and i not in done[b]]
        specs, spans = [], []  # spans: (budget, ladder index, first spec, seeds) of each pair
        for b, i in pairs:
            sds = seeds_at(b, a)
            spans.append((b, i, len(specs), len(sds)))
            specs += [("isoflop", b, *LADDER[i], lr_of(*LADDER[i]), sd) for sd in sds]
        rows = R.run_many(specs)
        for b, i, k, n in spans:
            done[b][i] = rows[k:k + n]

    run([(b, i) for b in a.budgets for i in window(b, a)])
    for _ in range(2):
        more = []
        for b in a.budgets:
            ok = {i: float(np.mean([float(r["val_loss"]) for r in rs])) for i, rs in done[b].items()
                  if all(r["status"] == "ok" for r in rs)}
            if len(ok) < 3:
                continue
            best = min(ok, key=ok.get)
            if best == min(ok) and best > 0:
                more.append((b, best - 1))
            elif best == max(ok) and best < len(LADDER) - 1:
                more.append((b, best + 1))
        run(more)
        if not more:
            break


def check_corpus_version(d):
    """The default corpus must have the layout prepare_corpus.sh makes now: the older one (32 kB documents
    in order) gives different losses, and a study must not mix the two silently."""
    f = d / "corpus_version.txt"
    got = f.read_text().strip() if f.is_file() else "none (an older layout: 32 kB documents in order)"
    if got != CORPUS_VERSION:
        raise c.UserError(f"{f}: layout '{got}', expected '{CORPUS_VERSION}': delete {d} and run "
                          "scripts/scaling/prepare_corpus.sh again")


def study(a, gpt, out):
    if a.quick and not a.data:
        tr, va = c.ensure_byte_data(gpt)
    else:
        d = Path(a.data) if a.data else c.REPO / "data" / "pd_english_byte"
        if not (list(d.glob("train_*.bin")) and list(d.glob("val_*.bin"))):
            raise c.UserError(f"{d}: no train_*.bin / val_*.bin (run scripts/scaling/prepare_corpus.sh first)")
        if not a.data or (d / "sources.csv").is_file():  # prepare_corpus.sh's folder, or a copy of it
            check_corpus_version(d)
        tr, va = str(d / "train_*.bin"), str(d / "val_*.bin")
    ntrain = sum((Path(f).stat().st_size - 1024) // 2 for f in sorted(Path(tr).parent.glob(Path(tr).name)))
    R = Runner(a, gpt, (tr, va, ntrain), out)
    t0 = time.time()

    # 1. learning rate: sweeps at the --sweep models, a power law in N_total through their optima
    if a.lr is not None:
        L0, d0, b0 = a.sweep[0]
        points = [(L0, d0, b0, n_total(L0, d0, a.T), a.lr)]
    else:
        points = sweep_lr(R, a.sweep, a)
    lr_of, k = lr_rule(points)
    c.progress("peak lr " + ", ".join(f"{p[4]:.4g} at N_total = {p[3]:,} (L={p[0]} C={p[1]})" for p in points)
               + "; every size by Kaplan's eq. D.1 fitted to them" + (f" (a free power law: N^{-k:.3f})" if k else ""))

    # 2. the IsoFLOP grid
    isoflop_grid(R, a, lr_of)

    # 3. a check of the rule between the sweeps: the middle budget's centre model at 0.5x and 2x its lr
    if a.lr is None:
        b = a.budgets[len(a.budgets) // 2]
        L1, d1 = LADDER[centre_index(b, a)]
        R.run_many([("lr_check", b, L1, d1, lr_of(L1, d1) * f) for f in (0.5, 2.0)])
    c.finish_scratch(R.tmp, R.rows)
    c.progress(f"training done in {time.time() - t0:.0f} s")
    return R.rows, {"lr_points": points, "lr_k": k, "wall_s": time.time() - t0}


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
    report.analyse(rows, out, a, meta)
    c.progress(f"wrote {out}/{NAME}.csv, {NAME}.png, nopt_vs_c.png, frontier.png, lnd_fit.png, results.md")


if __name__ == "__main__":
    c.main_guard(main)
