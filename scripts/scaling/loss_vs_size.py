#!/usr/bin/python3
"""Loss against model size, the Kaplan et al. (arXiv 2001.08361) L(N) = (N_c / N)^alpha_N sweep, small:
a family of models from ~0.05M to ~10M non-embedding parameters, each trained with `gpt train` on Tiny
Shakespeare at byte level (V = 257) with the same recipe and the same fixed token budget; the validation
loss at the last step is fitted as log L = log a - alpha log N by least squares, and alpha (with its
standard error) is reported beside Kaplan's alpha_N ~ 0.076.

The family is the depth family dL: L layers, L heads of 64 channels, C = 64L (nanoGPT / llm.c's aspect
ratio; d2/d4/d6 are presets), non-embedding parameters N = L(12C^2 + 13C) + 2C:
  d1 0.050M, d2 0.40M, d3 1.33M, d4 3.16M, d5 6.17M, d6 10.65M.

Caveat (written into results.md): a fixed, small budget at character level is far from Kaplan's regime
(BPE tokens, models trained to convergence or early-stopped on 10^10+ tokens), so the exponent differs.

Writes OUT/loss_vs_size.csv, OUT/loss_vs_size.png, OUT/results.md.
"""
import math
from pathlib import Path

import numpy as np

import common as c

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

NAME = "loss_vs_size"
KAPLAN_ALPHA_N = 0.076
FIELDS = ["config", "L", "NH", "C", "non_embedding_params", "total_params", "B", "T", "steps", "tokens", "lr",
          "final_train_loss", "val_loss", "seconds", "tokens_per_s", "status"]


def parse():
    p = c.base_parser(NAME, __doc__.splitlines()[0])
    p.add_argument("--configs", default=None, help="depth-family models (default d1..d6; quick d1,d2,d3)")
    p.add_argument("--tokens", type=int, default=None,
                   help="training tokens per model (default 786432 = 384 steps of 16 x 128, ~40 min for the "
                        "sweep on 2 shared cores; quick 8192)")
    p.add_argument("-B", type=int, default=None, help="micro-batch (default 16, quick 8)")
    p.add_argument("-T", type=int, default=None, help="sequence length, also --seq-len (default 128, quick 64)")
    p.add_argument("--lr", type=float, default=2e-3, help="peak learning rate for every model (default 2e-3)")
    p.add_argument("--warmup-frac", type=float, default=0.05, help="warmup steps as a fraction of steps (0.05)")
    p.add_argument("--val-batches", type=int, default=None, help="validation batches at the end (default 32, quick 4)")
    p.add_argument("--seed", type=int, default=1337, help="seed for every model (default 1337)")
    p.add_argument("--threads", type=int, default=1, help="OpenMP/OpenBLAS threads (default 1)")
    p.add_argument("--ranks", type=int, default=1, help="MPI ranks per run (default 1)")
    p.add_argument("--device", default="cpu", choices=["cpu", "cuda", "auto"], help="passed to gpt train")
    a = p.parse_args()
    a.configs = (a.configs or ("d1,d2,d3" if a.quick else "d1,d2,d3,d4,d5,d6")).split(",")
    for name in a.configs:
        c.family_shape(name)
    if len(set(a.configs)) < 2:
        raise c.UserError("--configs: a fit needs at least two different models")
    a.B = a.B or (8 if a.quick else 16)
    a.T = a.T or (64 if a.quick else 128)
    a.tokens = a.tokens if a.tokens is not None else (8192 if a.quick else 786432)
    a.val_batches = a.val_batches or (4 if a.quick else 32)
    for flag, v in (("-B", a.B), ("-T", a.T), ("--val-batches", a.val_batches), ("--threads", a.threads),
                    ("--ranks", a.ranks)):
        if v < 1:
            raise c.UserError(f"{flag}: expected >= 1, got {v}")
    c.check_ranks([a.ranks], "--ranks", c.MAX_RANKS, a.mpiexec)
    per_step = a.B * a.T * a.ranks
    if a.tokens < per_step:
        raise c.UserError(f"--tokens {a.tokens}: less than one step of B*T*ranks = {per_step} tokens")
    if a.tokens % per_step:
        raise c.UserError(f"--tokens {a.tokens}: not a multiple of B*T*ranks = {per_step}")
    a.steps = a.tokens // per_step
    if not (a.lr > 0 and 0 <= a.warmup_frac < 1):
        raise c.UserError("--lr must be > 0 and --warmup-frac in [0, 1)")
    return a


def train_one(a, gpt, data, name, tmp, log):
    L, NH, C = c.family_shape(name)
    units = c.unit_numels(L, C, c.BYTE_VOCAB, a.T)
    row = {"config": name, "L": L, "NH": NH, "C": C, "non_embedding_params": c.non_embedding_params(L, C),
           "total_params": sum(units), "B": a.B, "T": a.T, "steps": a.steps, "tokens": a.tokens, "lr": a.lr}
    metrics = Path(tmp) / f"{name}.jsonl"
    train, val = data
    argv = [gpt, "train"] + c.model_flags(name, c.BYTE_VOCAB, a.T) + [
        "--tokenizer", "byte", "--train", train, "--val", val, "-B", str(a.B), "-T", str(a.T),
        "--steps", str(a.steps), "--lr", str(a.lr), "--warmup", str(int(a.warmup_frac * a.steps)),
        "--seed", str(a.seed), "--val-every", str(a.steps), "--val-batches", str(a.val_batches),
        "--sample-tokens", "0", "--device", a.device, "--quiet", "--metrics", str(metrics)]
    rc, dt, out = c.run(c.launch(a, a.ranks, argv), c.mpi_env(a.threads), a.timeout, log)
    m = c.read_metrics(metrics)
    vals = [r["val_loss"] for r in m if "val_loss" in r]
    row["seconds"] = f"{dt:.1f}"
    if rc != 0 or not vals:
        row["status"] = f"failed (rc {rc}): {c.last_error_line(out)}"
        return row
    row["final_train_loss"] = f"{m[-1]['loss']:.4f}"
    row["val_loss"] = f"{vals[-1]:.4f}"
    row["tokens_per_s"] = f"{np.median([r['tokens_per_s'] for r in m]):.0f}"
    row["status"] = "ok"
    return row


def fit_power_law(n, loss):
    """Least squares of log L = log a - alpha log N. Returns (alpha, se_alpha, log_a, r2)."""
    x, y = np.log(np.asarray(n, float)), np.log(np.asarray(loss, float))
    X = np.stack([np.ones_like(x), x], axis=1)
    coef, _, _, _ = np.linalg.lstsq(X, y, rcond=None)
    resid = y - X @ coef
    dof = len(x) - 2
    if dof > 0:
        sigma2 = float(resid @ resid) / dof
        se_slope = math.sqrt(sigma2 / float(((x - x.mean()) ** 2).sum()))
    else:
        se_slope = float("nan")
    ss_tot = float(((y - y.mean()) ** 2).sum())
    r2 = 1 - float(resid @ resid) / ss_tot if ss_tot > 0 else float("nan")
    return -float(coef[1]), se_slope, float(coef[0]), r2


def plot(a, rows, fit, path):
    ok = [r for r in rows if r["status"] == "ok"]
    n = np.array([r["non_embedding_params"] for r in ok], float)
    loss = np.array([float(r["val_loss"]) for r in ok])
    fig, ax = plt.subplots(figsize=(8, 5.6))
    ax.scatter(n, loss, s=50, zorder=3, color="#4C72B0", label="validation loss at the end")
    for r, x, y in zip(ok, n, loss):
        ax.annotate(r["config"], (x, y), textcoords="offset points", xytext=(6, 4), fontsize=8)
    if fit:
        alpha, se, log_a, r2 = fit
        grid = np.geomspace(n.min() / 1.5, n.max() * 1.5, 50)
        ax.plot(grid, np.exp(log_a) * grid ** -alpha, "-", color="#C44E52",
                label=f"fit: L = {np.exp(log_a):.3g} N^-{alpha:.3f}  (α = {alpha:.3f} ± {se:.3f}, R² = {r2:.3f})")
        gm_n, gm_l = np.exp(np.log(n).mean()), np.exp(np.log(loss).mean())
        ax.plot(grid, gm_l * (grid / gm_n) ** -KAPLAN_ALPHA_N, "--", color="gray",
                label=f"Kaplan α_N = {KAPLAN_ALPHA_N} (slope only, through the geometric mean)")
    if len(ok):
        ax.set_xscale("log")
        ax.set_yscale("log")
        c.plain_log_ticks(ax, "y")
    else:
        ax.text(0.5, 0.5, "no successful runs (see results.md)", ha="center", transform=ax.transAxes)
    ax.set_xlabel("non-embedding parameters N (log scale)")
    ax.set_ylabel("validation loss (nats per byte, log scale)")
    ax.set_title(f"Tiny Shakespeare, byte level: loss vs size at a fixed budget of {a.tokens:,} tokens\n"
                 f"(B={a.B}, T={a.T}, {a.steps} steps, lr {a.lr}, same recipe for every model)", fontsize=10)
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def results_md(a, rows, fit, out):
    ok = [r for r in rows if r["status"] == "ok"]
    L = ["# Loss vs model size (Kaplan L(N) sweep, small)", "", f"Produced by `{c.command_line()}`.", "",
         "Family: depth family dL (L layers, L heads of 64 channels, C = 64L), byte vocabulary V = 257, "
         f"seq-len = T = {a.T}. Recipe, identical for every model: B = {a.B}, {a.steps} steps = {a.tokens:,} "
         f"training tokens, AdamW lr {a.lr} (warmup {int(a.warmup_frac * a.steps)} steps, decay to 0.1x), "
         f"weight decay 0.1, grad clip 1.0, seed {a.seed}; validation loss over {a.val_batches} batches of the "
         "held-out 10% at the last step. N = non-embedding parameters, L(12C² + 13C) + 2C.", ""]
    if fit:
        alpha, se, log_a, r2 = fit
        L += [f"**Fit over {len(ok)} models: α = {alpha:.4f} ± {se:.4f} (standard error of the slope), "
              f"L ≈ {math.exp(log_a):.4g} · N^-{alpha:.4f}, R² = {r2:.3f}. Kaplan et al.: α_N ≈ {KAPLAN_ALPHA_N}.**", ""]
    else:
        L += ["Fit: fewer than two successful runs, no fit.", ""]
    L += ["Why this is not Kaplan's regime: their α_N ≈ 0.076 is measured on WebText2 with BPE "
          "tokens, models from 768 to 1.5e9 non-embedding parameters trained on ~2e10 tokens (loss near "
          "convergence, early-stopped). Here the loss is in nats per *byte* on a 1 MB corpus, the models are "
          "tiny, and every model sees the same small budget, so the larger models are far from converged "
          "(the budget, not the size, limits them) while the smallest are capacity-limited. The exponent "
          "measured here is the slope of this particular small-budget, character-level curve, not an "
          "estimate of α_N.", "", "![loss vs size](loss_vs_size.png)", ""]
    L.append(c.md_table(rows, [
        ("model", lambda r: r["config"]), ("L", lambda r: r["L"]), ("heads", lambda r: r["NH"]), ("C", lambda r: r["C"]),
        ("non-embedding N", lambda r: f"{r['non_embedding_params']:,}"), ("total params", lambda r: f"{r['total_params']:,}"),
        ("tokens", lambda r: f"{r['tokens']:,}"), ("final train loss", lambda r: c.na(r.get("final_train_loss"))),
        ("val loss", lambda r: c.na(r.get("val_loss"))), ("tokens/s", lambda r: c.na(r.get("tokens_per_s"))),
        ("seconds", lambda r: c.na(r.get("seconds"))), ("status", lambda r: r["status"])]))
    (out / "results.md").write_text("\n".join(L) + "\n")


def main():
    a = parse()
    gpt = c.check_gpt(a.gpt)
    out = c.out_dir(a, NAME)
    data = c.ensure_byte_data(gpt)
    tmp = c.scratch(NAME)
    log = Path(tmp) / "runs.log"
    c.progress(f"{a.steps} steps x {a.B * a.T * a.ranks} tokens per model")
    rows = []
    for name in a.configs:
        rows.append(train_one(a, gpt, data, name, tmp, log))
        r = rows[-1]
        c.progress(f"{name}: N = {r['non_embedding_params']:,} non-embedding, val loss {r.get('val_loss', 'n/a')}, "
                   f"{r['seconds']} s ({r['status']})")
        c.write_csv(out / f"{NAME}.csv", rows, FIELDS)
    c.finish_scratch(tmp, rows)
    ok = [r for r in rows if r["status"] == "ok"]
    fit = fit_power_law([r["non_embedding_params"] for r in ok], [float(r["val_loss"]) for r in ok]) \
        if len(ok) >= 2 else None
    if fit:
        c.progress(f"alpha = {fit[0]:.4f} +- {fit[1]:.4f} (Kaplan alpha_N ~ {KAPLAN_ALPHA_N}), R^2 = {fit[3]:.3f}")
    plot(a, rows, fit, out / f"{NAME}.png")
    results_md(a, rows, fit, out)
    c.progress(f"wrote {out}/{NAME}.csv, {NAME}.png, results.md")


if __name__ == "__main__":
    c.main_guard(main)
