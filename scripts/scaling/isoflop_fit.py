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

import numpy as np

import common as c

KAPLAN = {"a": 0.73, "b": 0.27, "alpha_N": 0.076, "alpha_D": 0.095}
CHINCHILLA = {"a2": 0.49, "b2": 0.51, "a3": 0.46, "b3": 0.54, "a": 0.50, "alpha": 0.34, "beta": 0.28, "E": 1.69,
              "A": 406.4, "B": 410.7}
CONVENTIONS = [  # key, N column, C column, label
    ("nonembed_exact", "N_nonembed", "C_exact", "N non-embedding, C exact"),
    ("nonembed_6ND", "N_nonembed", "C_6ND_nonembed", "N non-embedding, C = 6ND"),
    ("total_exact", "N_total", "C_exact", "N with embeddings, C exact"),
    ("total_6ND", "N_total", "C_6ND_total", "N with embeddings, C = 6ND"),
]
# The headline counts as Chinchilla did (every parameter, exact FLOPs): the study's goal is their a.
PRIMARY = "total_exact"
PRIMARY_N = "N_total"


def best_lr(rows):
    """Peak lr minimising val loss over one sweep's runs: a parabola in ln lr through the best run and up to two
    neighbours on each side (more points average the runs' noise; a parabola that opens downward, or a best
    run at an end of the grid, gives the best run's lr). Returns (lr, index of the best run in lr order)."""
    ok = sorted((float(r["lr"]), float(r["val_loss"])) for r in rows if r["status"] == "ok")
    if not ok:
        raise c.UserError("an lr sweep has no successful run")
    i = int(np.argmin([l for _, l in ok]))
    if 0 < i < len(ok) - 1:
        sel = ok[max(0, i - 2):i + 3]
        x = np.log([p[0] for p in sel])
        cf = np.polyfit(x, [p[1] for p in sel], 2)
        if cf[0] > 0:
            return float(np.exp(np.clip(-cf[1] / (2 * cf[0]), x[0], x[-1]))), i
    return ok[i][0], i


def meta_from_rows(rows):
    """The lr sweeps' optima, read back from isoflop.csv (for --refit): [(L, C, budget, N_total, lr)]."""
    sweeps = {}
    for r in rows:
        if r["phase"] == "lr_sweep" and r["status"] == "ok":
            sweeps.setdefault((int(r["L"]), int(r["C"]), float(r["budget"]), int(r["N_total"])), []).append(r)
    points = [(*k, best_lr(v)[0]) for k, v in sorted(sweeps.items())]
    return {"lr_points": points, "lr_k": free_lr_exponent(points)}


def free_lr_exponent(points):
    """k of a free power law lr ∝ N_total^-k through the sweeps' optima [(L, C, budget, N_total, lr)], or None
    with fewer than two sizes. Reported beside the lr rule, which does not use it."""
    if len({p[3] for p in points}) < 2:
        return None
    return -float(np.polyfit(np.log([p[3] for p in points]), np.log([p[4] for p in points]), 1)[0])


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


def frontier_fit(res):
    C = np.array([p["C"] for p in res["pts"]])
    L = np.array([p["L"] for p in res["pts"]])
    s, k = np.polyfit(np.log(C), np.log(L), 1)
    return -s, k
