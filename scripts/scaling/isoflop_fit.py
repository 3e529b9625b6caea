"""The fits and plots of scripts/scaling/isoflop.py, from the rows of isoflop.csv.

Approach 2 (Hoffmann et al. 2022, IsoFLOP profiles): per budget, a parabola of loss against ln N; its vertex
is N_opt; D_opt and the budget's C at the vertex are read off the budget's runs (ln D and ln C are linear
in ln N along one budget: regressed, then evaluated at the vertex). a and b are the slopes of ln N_opt and
ln D_opt against ln C. Intervals: residual bootstrap (each run's loss is replaced by its parabola's value
plus a residual drawn from all budgets' residuals, inflated by sqrt(n/(n-3)) for the fitted parameters),
every parabola and the slopes refitted, 2.5 and 97.5 percentiles.

Approach 3: L(N, D) = E + A/N^alpha + B/D^beta fitted to every IsoFLOP run by minimising the Huber loss
(delta 1e-3) of log L against LSE(a - alpha ln N, b - beta ln D, e) (A = e^a, B = e^b, E = e^e), with
L-BFGS from Hoffmann et al.'s grid of 4500 starting points (to save time: from the 64 of them where the
objective is lowest); intervals by a case bootstrap over runs (200 resamples, L-BFGS from the full fit's
solution and two perturbations of it).

Counting conventions: N non-embedding or total, C = 6ND or the exact count (`isoflop.py` says what is in
it); the approach 2 exponents are given for each of the four pairs.
"""
import math
from pathlib import Path

import numpy as np

import common as c

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

KAPLAN = {"a": 0.73, "b": 0.27, "alpha_N": 0.076, "alpha_D": 0.095}
CHINCHILLA = {"a2": 0.49, "b2": 0.51, "a3": 0.46, "b3": 0.54, "a": 0.50, "alpha": 0.34, "beta": 0.28, "E": 1.69,
              "A": 406.4, "B": 410.7}
CONVENTIONS = [  # key, N column, C column, label
    ("nonembed_exact", "N_nonembed", "C_exact", "N non-embedding, C exact"),
    ("nonembed_6ND", "N_nonembed", "C_6ND_nonembed", "N non-embedding, C = 6ND"),
    ("total_exact", "N_total", "C_exact", "N with embeddings, C exact"),
    ("total_6ND", "N_total", "C_6ND_total", "N with embeddings, C = 6ND"),
]
PRIMARY = "nonembed_exact"


def meta_from_rows(rows):
    sweep = [r for r in rows if r["phase"] == "lr_sweep" and r["status"] == "ok"]
    meta = {"lr_ref": None, "n_ref": None, "ref_shape": None}
    if sweep:
        best = min(sweep, key=lambda r: float(r["val_loss"]))
        ok = sorted((float(r["lr"]), float(r["val_loss"])) for r in sweep)
        i = int(np.argmin([l for _, l in ok]))
        lr = ok[i][0]
        if 0 < i < len(ok) - 1:
            x = np.log([ok[j][0] for j in (i - 1, i, i + 1)])
            cf = np.polyfit(x, [ok[j][1] for j in (i - 1, i, i + 1)], 2)
            if cf[0] > 0:
                lr = float(np.exp(np.clip(-cf[1] / (2 * cf[0]), x[0], x[2])))
        meta.update(lr_ref=lr, n_ref=int(best["N_nonembed"]), ref_shape=(int(best["L"]), int(best["C"])))
    return meta


# ---------------------------------------------------------------------------------------------------------
# Approach 2


def groups(rows):
    g = {}
    for r in rows:
        if r["phase"] == "isoflop" and r["status"] == "ok":
            g.setdefault(float(r["budget"]), []).append(r)
    return {b: sorted(v, key=lambda r: int(r["N_nonembed"])) for b, v in sorted(g.items()) if len(v) >= 3}


def vertex(x, y):
    """Parabola y = c0 + c1 x + c2 x^2: (x*, y*, coef) or None when it opens downward."""
    cf = np.polyfit(x, y, 2)
    if cf[0] <= 0:
        return None
    xs = -cf[1] / (2 * cf[0])
    return xs, float(np.polyval(cf, xs)), cf


def approach2_points(G, ncol, ccol, losses=None):
    """Per budget (N*, D*, C*, L*, coef, inside); losses overrides the val losses (a bootstrap)."""
    pts = []
    for b, rs in G.items():
        x = np.log([float(r[ncol]) for r in rs])
        y = np.array([float(r["val_loss"]) for r in rs]) if losses is None else losses[b]
        v = vertex(x, y)
        if v is None:
            return None
        xs, ys, cf = v
        lnD = np.log([float(r["tokens"]) for r in rs])
        lnC = np.log([float(r[ccol]) for r in rs])
        dD = np.polyfit(x, lnD, 1)
        dC = np.polyfit(x, lnC, 1)
        pts.append({"budget": b, "N": math.exp(xs), "D": math.exp(np.polyval(dD, xs)),
                    "C": math.exp(np.polyval(dC, xs)), "L": ys, "coef": cf,
                    "inside": bool(x.min() <= xs <= x.max())})
    return pts


def slopes(pts):
    lc = np.log([p["C"] for p in pts])
    a, ka = np.polyfit(lc, np.log([p["N"] for p in pts]), 1)
    b, kb = np.polyfit(lc, np.log([p["D"] for p in pts]), 1)
    return a, b, ka, kb


def approach2(G, ncol, ccol, n_boot, rng):
    # budgets whose parabola opens downward (no minimum) are left out of the fit, and said so
    dropped = [b for b, rs in G.items()
               if vertex(np.log([float(r[ncol]) for r in rs]), [float(r["val_loss"]) for r in rs]) is None]
    G = {b: rs for b, rs in G.items() if b not in dropped}
    if len(G) < 2:
        return None
    pts = approach2_points(G, ncol, ccol)
    a, b, ka, kb = slopes(pts)
    fitted, resid = {}, []
    for (bud, rs), p in zip(G.items(), pts):
        x = np.log([float(r[ncol]) for r in rs])
        y = np.array([float(r["val_loss"]) for r in rs])
        fitted[bud] = np.polyval(p["coef"], x)
        n = len(rs)
        resid += list((y - fitted[bud]) * math.sqrt(n / max(1, n - 3)))
    resid = np.array(resid)
    boots, failed = [], 0
    for _ in range(n_boot):
        ls = {bud: f + rng.choice(resid, size=len(f), replace=True) for bud, f in fitted.items()}
        bp = approach2_points(G, ncol, ccol, ls)
        if bp is None:
            failed += 1
            continue
        boots.append(slopes(bp)[:2])
    boots = np.array(boots) if boots else np.zeros((0, 2))
    ci = lambda k: (tuple(np.percentile(boots[:, k], [2.5, 97.5])) if len(boots) >= 5 else (float("nan"),) * 2)  # noqa: E731
    rms = float(np.sqrt(np.mean(resid ** 2))) if len(resid) else float("nan")
    return {"pts": pts, "a": a, "b": b, "ka": ka, "kb": kb, "a_ci": ci(0), "b_ci": ci(1), "boots": boots,
            "failed": failed, "resid_rms": rms, "dropped": dropped, "G": G}


# ---------------------------------------------------------------------------------------------------------
# Approach 3


def _obj(p, lnN, lnD, lnL, delta):
    a, b, e, al, be = p
    t = np.stack([a - al * lnN, b - be * lnD, np.full_like(lnN, e)])
    m = t.max(axis=0)
    w = np.exp(t - m)
    s = w.sum(axis=0)
    pred = m + np.log(s)
    w /= s
    r = pred - lnL
    h = np.where(np.abs(r) <= delta, 0.5 * r * r, delta * (np.abs(r) - 0.5 * delta))
    g = np.clip(r, -delta, delta)
    grad = np.array([(g * w[0]).sum(), (g * w[1]).sum(), (g * w[2]).sum(), -(g * w[0] * lnN).sum(),
                     -(g * w[1] * lnD).sum()])
    return h.sum(), grad


def fit_lnd(N, D, L, starts, delta=1e-3, keep=64):
    from scipy.optimize import minimize

    lnN, lnD, lnL = np.log(N), np.log(D), np.log(L)
    if len(starts) > keep:
        # the objective at every grid point first (vectorised); L-BFGS from the `keep` best of them
        S = np.array(starts, float)
        t = np.stack([S[:, 0:1] - S[:, 3:4] * lnN, S[:, 1:2] - S[:, 4:5] * lnD,
                      np.repeat(S[:, 2:3], len(lnN), axis=1)])
        r = np.logaddexp(np.logaddexp(t[0], t[1]), t[2]) - lnL
        h = np.where(np.abs(r) <= delta, 0.5 * r * r, delta * (np.abs(r) - 0.5 * delta)).sum(axis=1)
        starts = S[np.argsort(h)[:keep]]
    best = None
    for s in starts:
        r = minimize(_obj, np.array(s, float), args=(lnN, lnD, lnL, delta), jac=True, method="L-BFGS-B",
                     options={"maxiter": 5000, "ftol": 1e-15, "gtol": 1e-12})
        if np.all(np.isfinite(r.x)) and (best is None or r.fun < best.fun):
            best = r
    a, b, e, al, be = best.x
    with np.errstate(over="ignore"):
        A, B, E = (float(np.exp(v)) for v in (a, b, e))
    return {"A": A, "B": B, "E": E, "alpha": float(al), "beta": float(be), "loss": float(best.fun), "x": best.x}


def grid_starts(quick):
    if quick:
        return [(a, b, e, al, be) for a in (0, 10) for b in (0, 10) for e in (0, 1) for al in (0.5,)
                for be in (0.5, 1.0)]
    return [(a, b, e, al, be) for a in (0, 5, 10, 15, 20, 25) for b in (0, 5, 10, 15, 20, 25)
            for e in (-1, -0.5, 0, 0.5, 1) for al in (0, 0.5, 1, 1.5, 2) for be in (0, 0.5, 1, 1.5, 2)]


def approach3(G, ncol, n_boot, rng, quick):
    rs = [r for v in G.values() for r in v]
    N = np.array([float(r[ncol]) for r in rs])
    D = np.array([float(r["tokens"]) for r in rs])
    L = np.array([float(r["val_loss"]) for r in rs])
    f = fit_lnd(N, D, L, grid_starts(quick))
    x0 = f["x"]
    boots = []
    for _ in range(n_boot):
        i = rng.integers(0, len(rs), len(rs))
        starts = [x0] + [x0 + rng.normal(0, [1, 1, 0.2, 0.1, 0.1]) for _ in range(2)]
        try:
            bf = fit_lnd(N[i], D[i], L[i], starts)
        except (ValueError, FloatingPointError, OverflowError):
            continue
        if not all(math.isfinite(bf[k]) for k in ("alpha", "beta", "E", "A", "B")) or bf["alpha"] + bf["beta"] == 0:
            continue
        boots.append([bf["alpha"], bf["beta"], bf["E"], bf["A"], bf["B"]])
    boots = np.array(boots)
    keys = ["alpha", "beta", "E", "A", "B"]
    f["ci"] = {k: tuple(np.percentile(boots[:, j], [2.5, 97.5])) for j, k in enumerate(keys)} if len(boots) >= 5 \
        else {k: (float("nan"),) * 2 for k in keys}
    s_ = f["alpha"] + f["beta"]
    f["a"] = f["beta"] / s_ if s_ else float("nan")
    f["b"] = f["alpha"] / s_ if s_ else float("nan")
    if len(boots) >= 5:
        aa = boots[:, 1] / (boots[:, 0] + boots[:, 1])
        f["ci"]["a"] = tuple(np.percentile(aa, [2.5, 97.5]))
        f["ci"]["b"] = tuple(np.percentile(1 - aa, [2.5, 97.5]))
    else:
        f["ci"]["a"] = f["ci"]["b"] = (float("nan"),) * 2
    pred = f["E"] + f["A"] / N ** f["alpha"] + f["B"] / D ** f["beta"]
    f["rms_rel"] = float(np.sqrt(np.mean((np.log(pred) - np.log(L)) ** 2)))
    f["n_boot"] = len(boots)
    f["N"], f["D"], f["L"] = N, D, L
    return f


# ---------------------------------------------------------------------------------------------------------
# Plots

COLORS = plt.rcParams["axes.prop_cycle"].by_key()["color"]


def plot_isoflop(G, A2, path):
    fig, axes = plt.subplots(1, 2, figsize=(13, 5.2))
    for ax, key, ncol, lab in ((axes[0], "nonembed_exact", "N_nonembed", "non-embedding parameters N"),
                               (axes[1], "total_exact", "N_total", "parameters with embeddings N")):
        res = A2.get(key)
        for j, (b, rs) in enumerate(G.items()):
            col = COLORS[j % len(COLORS)]
            n = np.array([float(r[ncol]) for r in rs])
            ax.plot(n, [float(r["val_loss"]) for r in rs], "o", color=col, label=f"C = {b:.2g} FLOPs")
            pm = [p for p in res["pts"] if p["budget"] == b] if res else []
            if pm:
                p = pm[0]
                g = np.geomspace(n.min() / 1.2, n.max() * 1.2, 100)
                ax.plot(g, np.polyval(p["coef"], np.log(g)), "-", color=col, alpha=0.7)
                ax.plot([p["N"]], [p["L"]], "*", color=col, ms=14, mec="k")
        ax.set_xscale("log")
        ax.set_xlabel(f"{lab} (log scale)")
        ax.set_ylabel("validation loss (nats per byte)")
        ax.grid(alpha=0.3, which="both")
        if res:
            ax.set_title(f"{lab.split(' N')[0]}: vertices (stars) give a = {res['a']:.3f}", fontsize=10)
        c.plain_log_ticks(ax, "x")
    axes[0].legend(fontsize=8)
    fig.suptitle("IsoFLOP profiles: loss against model size at fixed training compute (exact FLOPs), "
                 "parabola in ln N per budget", fontsize=11)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_nopt(A2, A3, path):
    res = A2.get(PRIMARY)
    fig, axes = plt.subplots(1, 2, figsize=(13, 5.2))
    if res:
        C = np.array([p["C"] for p in res["pts"]])
        g = np.geomspace(C.min() / 2, C.max() * 2, 50)
        for ax, k, slope, ci, kk, lab, pub in (
                (axes[0], "N", res["a"], res["a_ci"], res["ka"], "N_opt (non-embedding)",
                 [("Chinchilla a = 0.50", 0.50, "--"), ("Kaplan a = 0.73", 0.73, ":")]),
                (axes[1], "D", res["b"], res["b_ci"], res["kb"], "D_opt (tokens)",
                 [("Chinchilla b = 0.50", 0.50, "--"), ("Kaplan b = 0.27", 0.27, ":")])):
            y = np.array([p[k] for p in res["pts"]])
            ax.plot(C, y, "o", ms=8, color="#4C72B0", label=f"IsoFLOP vertices ({lab})", zorder=3)
            ax.plot(g, np.exp(kk) * g ** slope, "-", color="#4C72B0",
                    label=f"fit: slope {slope:.3f} [{ci[0]:.3f}, {ci[1]:.3f}] (95% bootstrap)")
            gm_c, gm_y = np.exp(np.log(C).mean()), np.exp(np.log(y).mean())
            for name, s, ls in pub:
                ax.plot(g, gm_y * (g / gm_c) ** s, ls, color="gray", label=f"{name} (slope through the centre)")
            if A3:
                s3 = A3["a"] if k == "N" else A3["b"]
                ax.plot(g, gm_y * (g / gm_c) ** s3, "-.", color="#C44E52",
                        label=f"approach 3: slope {s3:.3f} (from α, β)")
            ax.set_xscale("log")
            ax.set_yscale("log")
            ax.set_xlabel("training compute C (exact FLOPs, log scale)")
            ax.set_ylabel(f"{lab} (log scale)")
            ax.grid(alpha=0.3, which="both")
            ax.legend(fontsize=8)
            c.plain_log_ticks(ax, "y")
    fig.suptitle("Compute-optimal model size and data against compute (approach 2)", fontsize=11)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def frontier_fit(res):
    C = np.array([p["C"] for p in res["pts"]])
    L = np.array([p["L"] for p in res["pts"]])
    s, k = np.polyfit(np.log(C), np.log(L), 1)
    return -s, k


def plot_frontier(rows, A2, A3, path):
    fig, ax = plt.subplots(figsize=(8, 5.6))
    iso = [r for r in rows if r["phase"] == "isoflop" and r["status"] == "ok"]
    C = np.array([float(r["C_exact"]) for r in iso])
    L = np.array([float(r["val_loss"]) for r in iso])
    N = np.array([float(r["N_nonembed"]) for r in iso])
    sc = ax.scatter(C, L, c=np.log10(N), cmap="viridis", s=30, zorder=3)
    cb = fig.colorbar(sc, ax=ax)
    cb.set_label("log10 non-embedding N")
    res = A2.get(PRIMARY)
    if res:
        pc = np.array([p["C"] for p in res["pts"]])
        pl = np.array([p["L"] for p in res["pts"]])
        ax.plot(pc, pl, "*", ms=15, color="#C44E52", mec="k", label="IsoFLOP minima (parabola vertices)", zorder=4)
        gam, k = frontier_fit(res)
        g = np.geomspace(pc.min() / 1.5, pc.max() * 1.5, 50)
        ax.plot(g, np.exp(k) * g ** -gam, "-", color="#C44E52", label=f"L_min ∝ C^-{gam:.3f} (Kaplan: C^-0.050)")
    if A3 and A3["alpha"] > 0 and A3["beta"] > 0:
        g = np.geomspace(C.min() / 1.5, C.max() * 1.5, 60)
        # the fit's compute-optimal frontier under C = 6 N D (N non-embedding, as in the fit)
        al, be, A, B, E = A3["alpha"], A3["beta"], A3["A"], A3["B"], A3["E"]
        G_ = (al * A / (be * B)) ** (1 / (al + be))
        ratio = np.median(C / (6 * N * np.array([float(r["tokens"]) for r in iso])))
        ce = g / ratio
        Nopt = G_ * (ce / 6) ** (be / (al + be))
        Dopt = (ce / 6) / Nopt
        ax.plot(g, E + A / Nopt ** al + B / Dopt ** be, "--", color="gray",
                label=f"L(N,D) fit's frontier (E = {E:.3f})")
        ax.axhline(E, color="gray", lw=0.8, ls=":")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("training compute C (exact FLOPs, log scale)")
    ax.set_ylabel("validation loss (nats per byte, log scale)")
    ax.set_title("Every run's loss against its compute, and the compute-optimal frontier", fontsize=10)
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=8)
    c.plain_log_ticks(ax, "y")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_lnd(G, A3, path):
    fig, axes = plt.subplots(1, 2, figsize=(13, 5.2))
    if A3:
        E, A, B, al, be = A3["E"], A3["A"], A3["B"], A3["alpha"], A3["beta"]
        ax = axes[0]
        for j, (b, rs) in enumerate(G.items()):
            col = COLORS[j % len(COLORS)]
            n = np.array([float(r["N_nonembed"]) for r in rs])
            d = np.array([float(r["tokens"]) for r in rs])
            ax.plot(n, [float(r["val_loss"]) for r in rs], "o", color=col, label=f"C = {b:.2g}")
            gn = np.geomspace(n.min() / 1.2, n.max() * 1.2, 80)
            gd = np.exp(np.polyval(np.polyfit(np.log(n), np.log(d), 1), np.log(gn)))
            ax.plot(gn, E + A / gn ** al + B / gd ** be, "-", color=col, alpha=0.8)
        ax.set_xscale("log")
        ax.set_xlabel("non-embedding parameters N (log scale)")
        ax.set_ylabel("validation loss (nats per byte)")
        ax.set_title(f"L = {E:.3f} + {A:.4g}/N^{al:.3f} + {B:.4g}/D^{be:.3f} (lines) against the runs",
                     fontsize=10)
        ax.grid(alpha=0.3, which="both")
        ax.legend(fontsize=8)
        c.plain_log_ticks(ax, "x")
        ax = axes[1]
        pred = E + A / A3["N"] ** al + B / A3["D"] ** be
        ax.plot(A3["L"], pred, "o", color="#4C72B0")
        lo, hi = min(A3["L"].min(), pred.min()), max(A3["L"].max(), pred.max())
        ax.plot([lo, hi], [lo, hi], "-", color="gray", lw=0.8)
        ax.set_xlabel("measured validation loss")
        ax.set_ylabel("L(N, D) fit")
        ax.set_title(f"fit against data: rms of ln L residuals {A3['rms_rel']:.4f}", fontsize=10)
        ax.grid(alpha=0.3)
    fig.suptitle("Approach 3: L(N, D) = E + A/N^α + B/D^β, Huber loss on ln L, L-BFGS from a grid", fontsize=11)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


# ---------------------------------------------------------------------------------------------------------
# results.md


def fmt_ci(v, ci, nd=3):
    return f"{v:.{nd}f} [{ci[0]:.{nd}f}, {ci[1]:.{nd}f}]"


def account(rows, iso, res, A2, A3, out):
    """What differs from Kaplan and Chinchilla, with this run's numbers."""
    if not iso:
        return []
    ratio = [float(r["C_exact"]) / float(r["C_6ND_nonembed"]) for r in iso]
    ntot = [int(r["N_total"]) / int(r["N_nonembed"]) for r in iso]
    losses = [float(r["val_loss"]) for r in iso]
    ep = max(float(r["epochs"]) for r in iso)
    L = ["## What differs from Kaplan and Chinchilla, and why", ""]
    L.append(f"- **Scale.** Budgets of {min(float(r['budget']) for r in iso):.2g} to "
             f"{max(float(r['budget']) for r in iso):.2g} FLOPs, 7 to 10 orders of magnitude below Chinchilla's "
             f"IsoFLOP budgets (6e18 to 3e21), and models of {min(int(r['N_nonembed']) for r in iso):,} to "
             f"{max(int(r['N_nonembed']) for r in iso):,} non-embedding parameters. The losses, {min(losses):.2f} "
             f"to {max(losses):.2f} nats per byte ({min(losses) / math.log(2):.2f} to {max(losses) / math.log(2):.2f} "
             "bits), are those of models that have learnt letter and short-word statistics; none is near the "
             "corpus's entropy.")
    if res:
        tpp = [p["D"] / p["N"] for p in res["pts"]]
        L.append(f"- **Tokens per parameter.** At the vertices D/N is {min(tpp):.0f} to {max(tpp):.0f} bytes per "
                 "non-embedding parameter, not Chinchilla's ~20. Likely reasons, none tested here: a byte carries "
                 "about a quarter of what a GPT-2 token does, the blocks are a minority of the compute (below), "
                 "so each parameter costs more than 6 FLOPs per token, and models this small still gain from "
                 "more optimizer steps. The ladder was centred at 400 after a pilot centred at 20 found its "
                 "minima at the smallest models.")
    L.append(f"- **Counting.** The exact count is {min(ratio):.2f} to {max(ratio):.2f} times 6ND (N non-embedding): "
             "at d_model = 8 the LM head (2·384·C per token) and attention (2·L·T·C) outweigh the blocks (2N). "
             f"N with embeddings is {min(ntot):.2f} to {max(ntot):.2f} times N without. The convention table "
             "below shows how far that moves a. Kaplan counted non-embedding N and 6ND; Chinchilla counted all "
             "parameters and exact FLOPs; Porian et al. (2024) and Pearce & Song (2024) trace much of the "
             "0.73-vs-0.50 gap to exactly these choices (with the schedule, next).")
    L.append("- **Schedule.** Every run's cosine ends at its own D, as in Chinchilla. Kaplan read the compute "
             "frontier off intermediate points of runs with one long schedule, not yet decayed there; that "
             "penalises small D and raises a (Hoffmann et al. 2022, Porian et al. 2024).")
    chk = [r for r in rows if r["phase"] == "lr_check" and r["status"] == "ok"]
    if chk:
        base = [r for r in iso if r["L"] == chk[0]["L"] and r["C"] == chk[0]["C"] and r["budget"] == chk[0]["budget"]]
        parts = [f"{float(r['lr']):.3g}: {float(r['val_loss']):.4f}" for r in sorted(base + chk, key=lambda r: float(r["lr"]))]
        L.append(f"- **Learning rate.** One sweep and Kaplan's mild size rule, not a sweep per size. The check at "
                 f"L={chk[0]['L']}, C={chk[0]['C']} (N = {int(chk[0]['N_nonembed']):,}), lr: val loss = "
                 + "; ".join(parts) + ". The loss moves by tenths of a nat over a factor of 4 in lr at these "
                 "sizes, so a rule that is off for some sizes tilts the IsoFLOP curves.")
    if res:
        depth = [float(max(float(r["val_loss"]) for r in rs) - p["L"]) for p, rs in zip(res["pts"], res["G"].values())]
        L.append(f"- **Noise.** One seed per run. The runs scatter about their parabolas by {res['resid_rms']:.3f} "
                 f"nats (rms); the curves are {min(depth):.2f} to {max(depth):.2f} nats deep across a window. The "
                 "validation set is the same 131k bytes for every run, so its own sampling noise largely cancels "
                 "between runs; what remains is training noise, which the bootstrap intervals carry.")
    L.append(f"- **Data.** {ep:.2f} epochs at most (no repetition), 27 MB of mostly Biblical English against "
             "WebText2 (Kaplan) and MassiveText (Chinchilla). E is the fit's floor for this corpus and these "
             "models, in nats per byte; it is not comparable with Chinchilla's 1.69 nats per token.")
    if (Path(out) / "excluded_3layer.csv").is_file():
        L.append("- **Shape.** The ladder is 2-layer models of growing width. A first version had 3-layer models "
                 "above 25k parameters; the one trained (L=3, C=32 at 9e11, `excluded_3layer.csv`) ended 0.22 nats "
                 "above its 2-layer neighbour, and since the lr rule knows N but not depth, the ladder was changed "
                 "to one depth before the largest budget's larger models were trained.")
    if (Path(out) / "pilot_b16.csv").is_file():
        L.append("- **Pilot.** `pilot_b16.csv` holds the first attempt (batch 16 × 128, lr 3e-3 from a sweep at "
                 "d = 48, ladder centred at D/N = 20). Its minima all sat at the smallest model, at losses of "
                 "2.4 to 2.7; it was stopped, and the study was rerun with the design above.")
    L.append("")
    return L


def results_md(rows, G, A2, A3, A3t, out, a, meta):
    iso = [r for r in rows if r["phase"] == "isoflop" and r["status"] == "ok"]
    res = A2.get(PRIMARY)
    L = ["# Compute-optimal scaling at small scale: IsoFLOP profiles and L(N, D)", ""]
    if meta.get("study_command") and meta["study_command"] != meta.get("command"):
        L.append(f"Runs by `{meta['study_command']}`; fits and plots by `{meta.get('command', '')}`.")
    else:
        L.append(f"Produced by `{meta.get('command', '')}`.")
    secs = [float(r["seconds"]) for r in rows if r.get("seconds")]
    if secs:
        L.append(f"Training time: {len(secs)} runs, {sum(secs) / 60:.1f} min in all (the sum of each run's wall "
                 f"time; single process, {getattr(a, 'threads', 2)} OpenMP threads).")
    L.append("")
    if res:
        L += [f"**Approach 2 (IsoFLOP parabolas, N non-embedding, C exact): a = {fmt_ci(res['a'], res['a_ci'])}, "
              f"b = {fmt_ci(res['b'], res['b_ci'])}** (N_opt ∝ C^a, D_opt ∝ C^b; 95% residual-bootstrap "
              f"intervals over {len(res['boots'])} resamples). Chinchilla: a ≈ 0.50 (approach 2: 0.49), "
              "Kaplan: 0.73.", ""]
    if A3:
        ci = A3["ci"]
        L += [f"**Approach 3 (L(N, D) = E + A/N^α + B/D^β, N non-embedding): α = {fmt_ci(A3['alpha'], ci['alpha'])}, "
              f"β = {fmt_ci(A3['beta'], ci['beta'])}, E = {fmt_ci(A3['E'], ci['E'])} nats/byte**, "
              f"A = {A3['A']:.4g}, B = {A3['B']:.4g}; implied a = β/(α+β) = {fmt_ci(A3['a'], ci['a'])} "
              f"(case bootstrap over runs, {A3['n_boot']} resamples). Chinchilla: α = 0.34, β = 0.28, E = 1.69 "
              "nats/token.", ""]
    # comparison table
    L += ["## Side by side", ""]
    tbl = [("N_opt ∝ C^a", f"{fmt_ci(res['a'], res['a_ci'])}" if res else "n/a", "0.73", "0.50 (0.49 / 0.46)"),
           ("D_opt ∝ C^b", f"{fmt_ci(res['b'], res['b_ci'])}" if res else "n/a", "0.27", "0.50 (0.51 / 0.54)")]
    if A3:
        tbl += [("a implied by α, β (approach 3)", fmt_ci(A3["a"], A3["ci"]["a"]), "—", "0.46"),
                ("α (model-size exponent)", fmt_ci(A3["alpha"], A3["ci"]["alpha"]), "0.076 (α_N, no E)", "0.34"),
                ("β (data exponent)", fmt_ci(A3["beta"], A3["ci"]["beta"]), "0.095 (α_D, no E)", "0.28"),
                ("E (irreducible loss)", fmt_ci(A3["E"], A3["ci"]["E"]) + " nats/byte", "— (none in the fit)",
                 "1.69 nats/token")]
    if res:
        tpp = [p["D"] / p["N"] for p in res["pts"]]
        gam, _ = frontier_fit(res)
        tbl += [("tokens per parameter at the optimum", ", ".join(f"{t:.0f}" for t in tpp) + " (per budget)", "—", "≈ 20"),
                ("L_min(C) ∝ C^-γ (power law, no offset)", f"{gam:.3f}", "0.050", "—")]
    tbl += [("N counted", "non-embedding (both shown below)", "non-embedding", "all parameters"),
            ("C counted", "exact: 3(2N + 2LTC + 2CV) per token", "6 N D (non-embedding)", "exact (incl. embeddings, attention)"),
            ("schedule", "cosine to 10% ending at each run's D", "fixed length, early-stopped", "cosine to 10% at each run's D"),
            ("data", "27 MB public-domain English, bytes, < 0.5 epoch", "WebText2 BPE, 2.3e10 tokens", "MassiveText BPE, 1.4e12 tokens"),
            ("models", f"{min(int(r['N_nonembed']) for r in iso):,} to {max(int(r['N_nonembed']) for r in iso):,} non-embedding"
             if iso else "n/a", "768 to 1.5e9", "7e7 to 1.6e10"),
            ("compute", f"{min(G):.2g} to {max(G):.2g} FLOPs" if G else "n/a", "up to ~1e20 (PF-days)", "6e18 to 3e21 (IsoFLOP)")]
    L.append(c.md_table(tbl, [("quantity", lambda r: r[0]), ("this study", lambda r: r[1]),
                              ("Kaplan et al. 2020", lambda r: r[2]), ("Hoffmann et al. 2022", lambda r: r[3])]))
    L.append("")
    L += account(rows, iso, res, A2, A3, out)
    # conventions
    L += ["## How the exponents move with the counting", "",
          "The same runs, re-read under each convention: the parabola is in ln N of that convention, and C is "
          "that convention's count at the vertex. A budget's runs no longer share one C exactly under the "
          "6ND counts (the exact count is what was held fixed), which is why C is read at the vertex.", ""]
    crow = []
    for key, ncol, ccol, lab in CONVENTIONS:
        r2 = A2.get(key)
        if r2:
            crow.append((lab, fmt_ci(r2["a"], r2["a_ci"]), fmt_ci(r2["b"], r2["b_ci"]),
                         ", ".join(f"{p['N']:,.0f}" for p in r2["pts"])))
    if A3t:
        crow.append(("approach 3 with N with embeddings", fmt_ci(A3t["a"], A3t["ci"]["a"]),
                     fmt_ci(A3t["b"], A3t["ci"]["b"]),
                     f"α = {A3t['alpha']:.3f}, β = {A3t['beta']:.3f}, E = {A3t['E']:.3f}"))
    L.append(c.md_table(crow, [("convention", lambda r: r[0]), ("a", lambda r: r[1]), ("b", lambda r: r[2]),
                               ("N_opt per budget / fit", lambda r: r[3])]))
    L.append("")
    for img, cap in (("isoflop.png", "IsoFLOP profiles"), ("nopt_vs_c.png", "N_opt and D_opt against C"),
                     ("frontier.png", "loss frontier"), ("lnd_fit.png", "L(N, D) fit")):
        L += [f"![{cap}]({img})", ""]
    if res:
        L += ["## The IsoFLOP vertices", "",
              c.md_table(res["pts"], [("budget (FLOPs)", lambda p: f"{p['budget']:.3g}"),
                                      ("C at vertex", lambda p: f"{p['C']:.3g}"),
                                      ("N_opt", lambda p: f"{p['N']:,.0f}"), ("D_opt", lambda p: f"{p['D']:,.0f}"),
                                      ("D/N", lambda p: f"{p['D'] / p['N']:.1f}"), ("loss at vertex", lambda p: f"{p['L']:.4f}"),
                                      ("curvature (per ln N²)", lambda p: f"{p['coef'][0]:.4f}"),
                                      ("vertex inside the grid", lambda p: "yes" if p["inside"] else "NO")]), "",
              "Leave one budget out (slopes of the other three vertices): "
              + "; ".join(f"without {p['budget']:.3g}: a = {slopes([q for q in res['pts'] if q is not p])[0]:.3f}, "
                          f"b = {slopes([q for q in res['pts'] if q is not p])[1]:.3f}"
                          for p in res["pts"]) + ("." if len(res["pts"]) > 2 else "") if len(res["pts"]) > 2 else "",
              "",
              f"Scatter of the runs about their parabolas: rms {res['resid_rms']:.4f} nats/byte. Bootstrap "
              f"resamples in which some parabola opened downward (dropped): {res['failed']}."
              + (f" Budgets left out because their parabola has no minimum: "
                 f"{', '.join(f'{b:.3g}' for b in res['dropped'])}." if res["dropped"] else ""), ""]
    # learning rate
    L += ["## Learning rate", ""]
    if meta.get("lr_ref"):
        L.append(f"Sweep at L={meta['ref_shape'][0]}, C={meta['ref_shape'][1]} (N = {meta['n_ref']:,}): best peak lr "
                 f"{meta['lr_ref']:.4g} (parabola in ln lr through the best three). Other sizes: Kaplan's eq. D.1, "
                 "lr(N) ∝ 0.003239 − 0.0001395 ln N, normalised to that point. The lr_check runs try 0.5x and 2x the "
                 "rule's lr at the largest model of the sweep's budget.")
    L.append("")
    sw = [r for r in rows if r["phase"] in ("lr_sweep", "lr_check")]
    if sw:
        L.append(c.md_table(sw, [("phase", lambda r: r["phase"]), ("L", lambda r: r["L"]), ("C", lambda r: r["C"]),
                                 ("N", lambda r: f"{int(r['N_nonembed']):,}"), ("steps", lambda r: r["steps"]),
                                 ("lr", lambda r: r["lr"]), ("val loss", lambda r: c.na(r.get("val_loss"))),
                                 ("status", lambda r: r["status"])]))
        L.append("")
    L += ["## Every IsoFLOP run", "",
          c.md_table(iso, [("budget", lambda r: r["budget"]), ("L", lambda r: r["L"]), ("heads", lambda r: r["NH"]),
                           ("C", lambda r: r["C"]), ("N non-emb.", lambda r: f"{int(r['N_nonembed']):,}"),
                           ("N total", lambda r: f"{int(r['N_total']):,}"), ("steps", lambda r: r["steps"]),
                           ("tokens", lambda r: f"{int(r['tokens']):,}"), ("epochs", lambda r: r["epochs"]),
                           ("exact / 6ND", lambda r: f"{float(r['C_exact']) / float(r['C_6ND_nonembed']):.2f}"),
                           ("lr", lambda r: r["lr"]), ("val loss", lambda r: r["val_loss"]),
                           ("s", lambda r: r["seconds"])]), ""]
    (out / "results.md").write_text("\n".join(L) + "\n")
    return L


def analyse(rows, out, a, meta):
    out = Path(out)
    quick = bool(getattr(a, "quick", False))
    nb = getattr(a, "bootstrap", 2000)
    rng = np.random.default_rng(12345)
    G = groups(rows)
    A2 = {}
    for key, ncol, ccol, _ in CONVENTIONS:
        r = approach2(G, ncol, ccol, nb, rng) if len(G) >= 2 else None
        if r:
            A2[key] = r
            c.progress(f"approach 2 [{key}]: a = {fmt_ci(r['a'], r['a_ci'])}, b = {fmt_ci(r['b'], r['b_ci'])}")
    A3 = A3t = None
    if sum(len(v) for v in G.values()) >= 6:
        nb3 = min(nb, 10 if quick else 200)
        A3 = approach3(G, "N_nonembed", nb3, rng, quick)
        A3t = approach3(G, "N_total", nb3, rng, quick)
        c.progress(f"approach 3: alpha = {fmt_ci(A3['alpha'], A3['ci']['alpha'])}, "
                   f"beta = {fmt_ci(A3['beta'], A3['ci']['beta'])}, E = {fmt_ci(A3['E'], A3['ci']['E'])}, "
                   f"a = {fmt_ci(A3['a'], A3['ci']['a'])}")
    plot_isoflop(G, A2, out / "isoflop.png")
    plot_nopt(A2, A3, out / "nopt_vs_c.png")
    plot_frontier(rows, A2, A3, out / "frontier.png")
    plot_lnd(G, A3, out / "lnd_fit.png")
    results_md(rows, G, A2, A3, A3t, out, a, meta)
    return A2, A3
