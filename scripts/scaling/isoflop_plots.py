"""The plots of scripts/scaling/isoflop.py: the IsoFLOP profiles, N_opt and D_opt against C, the loss frontier
and the L(N, D) fit against the runs, drawn from the fits of isoflop_fit.py."""
import numpy as np

import common as c
from isoflop_fit import PRIMARY, PRIMARY_N, frontier_fit

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

COLORS = plt.rcParams["axes.prop_cycle"].by_key()["color"]


def plot_isoflop(G, A2, path):
    fig, axes = plt.subplots(1, 2, figsize=(13, 5.2))
    for ax, key, ncol, lab in ((axes[0], "total_exact", "N_total", "parameters with embeddings N"),
                               (axes[1], "nonembed_exact", "N_nonembed", "non-embedding parameters N")):
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
                (axes[0], "N", res["a"], res["a_ci"], res["ka"], "N_opt (with embeddings)",
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


def plot_frontier(rows, A2, A3, path):
    fig, ax = plt.subplots(figsize=(8, 5.6))
    iso = [r for r in rows if r["phase"] == "isoflop" and r["status"] == "ok"]
    C = np.array([float(r["C_exact"]) for r in iso])
    L = np.array([float(r["val_loss"]) for r in iso])
    N = np.array([float(r[PRIMARY_N]) for r in iso])
    sc = ax.scatter(C, L, c=np.log10(N), cmap="viridis", s=30, zorder=3)
    cb = fig.colorbar(sc, ax=ax)
    cb.set_label("log10 N (with embeddings)")
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
        # the fit's compute-optimal frontier under C = 6 N D (N as in the fit), scaled to the exact count
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
            n = np.array([float(r[PRIMARY_N]) for r in rs])
            d = np.array([float(r["tokens"]) for r in rs])
            ax.plot(n, [float(r["val_loss"]) for r in rs], "o", color=col, label=f"C = {b:.2g}")
            gn = np.geomspace(n.min() / 1.2, n.max() * 1.2, 80)
            gd = np.exp(np.polyval(np.polyfit(np.log(n), np.log(d), 1), np.log(gn)))
            ax.plot(gn, E + A / gn ** al + B / gd ** be, "-", color=col, alpha=0.8)
        ax.set_xscale("log")
        ax.set_xlabel("parameters with embeddings N (log scale)")
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
