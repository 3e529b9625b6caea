"""results.md of scripts/scaling/isoflop.py: the exponents with their intervals, the table beside Kaplan and
Chinchilla, what differs and why (with this run's numbers), the counting conventions, the vertices, the lr
sweeps and every run; analyse() runs the fits, the plots and this report."""
import math
from pathlib import Path

import numpy as np

import common as c
import isoflop_fit as fit
import isoflop_plots as plots
from isoflop_fit import CONVENTIONS, PRIMARY, frontier_fit, slopes

def fmt_ci(v, ci, nd=3):
    return f"{v:.{nd}f} [{ci[0]:.{nd}f}, {ci[1]:.{nd}f}]"


def account(rows, iso, res, A2, A3, out, meta):
    """What differs from Kaplan and Chinchilla, with this run's numbers."""
    if not iso:
        return []
    ratio = [float(r["C_exact"]) / float(r["C_6ND_nonembed"]) for r in iso]
    ntot = [int(r["N_total"]) / int(r["N_nonembed"]) for r in iso]
    losses = [float(r["val_loss"]) for r in iso]
    ep = max(float(r["epochs"]) for r in iso)
    L = ["## What differs from Kaplan and Chinchilla, and why", ""]
    lo, hi = min(float(r["budget"]) for r in iso), max(float(r["budget"]) for r in iso)
    L.append(f"- **Scale.** Budgets of {lo:.3g} to {hi:.3g} FLOPs, {math.log10(6e18 / hi):.1f} to "
             f"{math.log10(3e21 / lo):.1f} orders of magnitude below Chinchilla's "
             f"IsoFLOP budgets (6e18 to 3e21), and models of {min(int(r['N_total']) for r in iso):,} to "
             f"{max(int(r['N_total']) for r in iso):,} parameters. The losses, {min(losses):.2f} to "
             f"{max(losses):.2f} nats per byte ({min(losses) / math.log(2):.2f} to {max(losses) / math.log(2):.2f} "
             "bits), are those of models that have learnt letter and short-word statistics; none is near the "
             "corpus's entropy.")
    if res:
        tpp = [p["D"] / p["N"] for p in res["pts"]]
        L.append(f"- **Tokens per parameter.** At the vertices D/N is {min(tpp):.0f} to {max(tpp):.0f} bytes per "
                 "parameter, not Chinchilla's ~20. Likely reasons, none tested here: a byte carries about a "
                 "quarter of what a GPT-2 token does, the blocks are a minority of the compute (below), so each "
                 "parameter costs more than 6 FLOPs per token, and models this small still gain from more "
                 "optimizer steps.")
    L.append(f"- **Counting.** The exact count is {min(ratio):.2f} to {max(ratio):.2f} times 6ND (N non-embedding): "
             "at these widths the LM head (2·384·C per token) and attention (2·L·T·C) rival the blocks (2N). "
             f"N with embeddings is {min(ntot):.2f} to {max(ntot):.2f} times N without. The headline counts as "
             "Chinchilla did (every parameter, exact FLOPs), since their a is the goal; the convention table "
             "below gives the other three. Kaplan counted non-embedding N and 6ND; Porian et al. (2024) and "
             "Pearce & Song (2024) trace much of the 0.73-vs-0.50 gap to exactly these choices (with the "
             "schedule and the optimizer's settings, next).")
    L.append("- **Schedule.** Every run's cosine ends at its own D, as in Chinchilla. Kaplan read the compute "
             "frontier off intermediate points of runs with one long schedule, not yet decayed there; that "
             "penalises small D and raises a (Hoffmann et al. 2022, Porian et al. 2024).")
    L += lr_account(rows, iso, meta)
    b2 = sorted({str(r.get("beta2", "0.95")) for r in iso})
    L.append(f"- **Optimizer.** AdamW with β2 = {', '.join(b2)}. At small batches (here {iso[0]['B']} x {iso[0]['T']} "
             "tokens) Porian et al. (2024) found 0.95 too short an average for small models and used 0.99."
             + (" A pilot (`pilot_beta2_seeds.csv`: 0.95, 0.99 and 0.999 at two sizes, and two more seeds at "
                "0.95) found no difference beyond the seed-to-seed spread, so the choice rests on their result, "
                "not on ours." if (Path(out) / "pilot_beta2_seeds.csv").is_file() else ""))
    L.append(init_account(iso, out))
    if res:
        depth = [float(max(float(r["val_loss"]) for r in rs) - p["L"]) for p, rs in zip(res["pts"], res["G"].values())]
        L.append(f"- **Noise.** {seeds_account(iso)}, each run its own point on the parabola. The runs scatter about their parabolas by {res['resid_rms']:.3f} nats (rms); the "
                 f"curves are {min(depth):.2f} to {max(depth):.2f} nats deep across a window. The validation set is "
                 "the same 131k bytes (about a hundred 1 kB pieces from all sources) for every run, so its own sampling "
                 "noise largely cancels between runs; what remains is training noise, which the bootstrap "
                 "intervals carry: the seed sets the init (every run reads the data in the same order), and "
                 "rounding differences grow chaotically (one run on two threads instead of one ended 0.03 nats "
                 "apart).")
    reads = ("no run repeats data" if ep <= 1 else "the smallest models at the largest budgets read the corpus "
             "more than once, within the ~4 epochs that Muennighoff et al. (2023) found to act like fresh data")
    L.append(f"- **Data.** {ep:.2f} epochs at most ({reads}), 27 MB of mostly Biblical English in 1 kB pieces "
             "shuffled across sources, against WebText2 (Kaplan) and MassiveText (Chinchilla). E is the fit's "
             "floor for this corpus and these models, in nats per byte; it is not comparable with Chinchilla's "
             "1.69 nats per token.")
    L.append("- **Shape.** Every model has 2 layers and heads 8 channels wide; width alone grows, since the lr "
             "rule knows N but not the shape.")
    L.append("")
    return L


def seeds_account(iso):
    """'One seed per size and budget (1337)', or which budgets ran which seeds when they differ."""
    by = {}
    for r in iso:
        by.setdefault(float(r["budget"]), set()).add(int(r["seed"]))
    groups = {}
    for b, sds in sorted(by.items()):
        groups.setdefault(tuple(sorted(sds)), []).append(f"{b:.3g}")
    def one(sds, per):
        return f"{'one seed' if len(sds) == 1 else f'{len(sds)} seeds'} per {per} ({', '.join(map(str, sds))})"
    if len(groups) == 1:
        text = one(next(iter(groups)), "size and budget")
    else:
        text = "; ".join(f"{one(sds, 'size')} at {', '.join(bs)}" for sds, bs in groups.items())
    return text[0].upper() + text[1:]


def init_account(iso, out):
    inits = sorted({r.get("init") or "gpt2" for r in iso})
    if inits == ["gpt2"]:
        return ("- **Init.** `gpt train --init gpt2`: weight matrices N(0, 0.02) as in GPT-2 (embeddings N(0, 0.02) "
                "throughout).")
    if inits != ["width"]:
        return f"- **Init.** Mixed: runs under `gpt train --init` {' and '.join(inits)} (see the CSV's init column)."
    return ("- **Init.** `gpt train --init width`: weight matrices N(0, 0.02·sqrt(768/C)), the 1/sqrt(fan-in) rule "
            "anchored at GPT-2's own 0.02 at C = 768 (0.08 at C = 48); embeddings N(0, 0.02). With GPT-2's fixed 0.02 "
            "these narrow models leave their early plateau at a step set by the seed, and single runs moved by up to "
            "0.11 nats between seeds"
            + (" (`pilot_init_seeds.csv`: four seeds of one model spread over 0.11 nats under 0.02 and 0.02 under "
               "the width rule)" if (Path(out) / "pilot_init_seeds.csv").is_file() else "") + ".")


def lr_account(rows, iso, meta):
    pts, k = meta.get("lr_points") or [], meta.get("lr_k")
    if not pts:
        return []
    txt = ("- **Learning rate.** A sweep at " + " and ".join(f"C={p[1]} (N = {p[3]:,}, at {p[2]:.3g} FLOPs): "
                                                             f"{p[4]:.3g}" for p in pts))
    lrs = [float(r["lr"]) for r in iso]
    txt += (f". Every size then follows Kaplan's eq. D.1 (lr ∝ 0.003239 − 0.0001395 ln N, N non-embedding), its "
            f"level fitted to both optima: {max(lrs):.3g} at the smallest model to {min(lrs):.3g} at the largest.")
    if k is not None:
        txt += (f" A free power law through the two optima would go as N^{-k:+.2f}; each sweep's loss is flat "
                "within the runs' noise over most of its grid (the table below), so the optima fix a level "
                "but not a slope, and the rule takes its slope from Kaplan.")
    chk = [r for r in rows if r["phase"] == "lr_check" and r["status"] == "ok"]
    if chk:
        base = [r for r in iso if r["L"] == chk[0]["L"] and r["C"] == chk[0]["C"] and r["budget"] == chk[0]["budget"]]
        parts = [f"{float(r['lr']):.3g}: {float(r['val_loss']):.4f}" for r in sorted(base + chk, key=lambda r: float(r["lr"]))]
        txt += (f" The rule checked at C={chk[0]['C']} (N = {int(chk[0]['N_total']):,}, {chk[0]['budget']} FLOPs), "
                "lr: val loss = " + "; ".join(parts) + ". A rule that is off for some sizes tilts the IsoFLOP "
                "curves; Porian et al. (2024) tuned lr and batch per size, which this budget cannot.")
    return [txt]


def headline(rows, res, A3, a, meta):
    L = ["# Compute-optimal scaling at small scale: IsoFLOP profiles and L(N, D)", ""]
    if meta.get("study_command") and meta["study_command"] != meta.get("command"):
        L.append(f"Runs by `{meta['study_command']}`; fits and plots by `{meta.get('command', '')}`.")
    else:
        L.append(f"Produced by `{meta.get('command', '')}`.")
    secs = [float(r["seconds"]) for r in rows if r.get("seconds")]
    if secs:
        L.append(f"Training time: {len(secs)} runs, {sum(secs) / 60:.1f} min in all (the sum of each run's wall "
                 f"time; the runs go {getattr(a, 'jobs', 1)} at a time, {getattr(a, 'threads', 1)} OpenMP thread "
                 "each, so the study's own wall time is about that sum divided by the runs at a time).")
    L.append("")
    if res:
        L += [f"**Approach 2 (IsoFLOP parabolas; N every parameter, C exact, as Chinchilla counted): "
              f"a = {fmt_ci(res['a'], res['a_ci'])}, "
              f"b = {fmt_ci(res['b'], res['b_ci'])}** (N_opt ∝ C^a, D_opt ∝ C^b; 95% residual-bootstrap "
              f"intervals over {len(res['boots'])} resamples). Chinchilla: a ≈ 0.50 (approach 2: 0.49), "
              "Kaplan: 0.73.", ""]
    if A3:
        ci = A3["ci"]
        L += [f"**Approach 3 (L(N, D) = E + A/N^α + B/D^β, N every parameter): α = {fmt_ci(A3['alpha'], ci['alpha'])}, "
              f"β = {fmt_ci(A3['beta'], ci['beta'])}, E = {fmt_ci(A3['E'], ci['E'])} nats/byte**, "
              f"A = {A3['A']:.4g}, B = {A3['B']:.4g}; implied a = β/(α+β) = {fmt_ci(A3['a'], ci['a'])} "
              f"(case bootstrap over runs, {A3['n_boot']} resamples). Chinchilla: α = 0.34, β = 0.28, E = 1.69 "
              "nats/token.", ""]
    return L


def side_by_side(iso, G, res, A3):
    L = ["## Side by side", ""]
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
    tbl += [("N counted", "all parameters (the others below)", "non-embedding", "all parameters"),
            ("C counted", "exact: 3(2N + 2LTC + 2CV) per token", "6 N D (non-embedding)", "exact (incl. embeddings, attention)"),
            ("schedule", "cosine to 10% ending at each run's D", "fixed length, early-stopped", "cosine to 10% at each run's D"),
            ("data", f"27 MB public-domain English, bytes, at most {max((float(r['epochs']) for r in iso), default=0):.2f} epochs",
             "WebText2 BPE, 2.3e10 tokens", "MassiveText BPE, 1.4e12 tokens"),
            ("models", f"{min(int(r['N_total']) for r in iso):,} to {max(int(r['N_total']) for r in iso):,} parameters"
             if iso else "n/a", "768 to 1.5e9", "7e7 to 1.6e10"),
            ("compute", f"{min(G):.3g} to {max(G):.3g} FLOPs" if G else "n/a", "up to ~1e20 (PF-days)", "6e18 to 3e21 (IsoFLOP)")]
    L.append(c.md_table(tbl, [("quantity", lambda r: r[0]), ("this study", lambda r: r[1]),
                              ("Kaplan et al. 2020", lambda r: r[2]), ("Hoffmann et al. 2022", lambda r: r[3])]))
    L.append("")
    return L


def conventions(A2, A3n):
    L = ["## How the exponents move with the counting", "",
          "The same runs, re-read under each convention: the parabola is in ln N of that convention, and C is "
          "that convention's count at the vertex. A budget's runs no longer share one C exactly under the "
          "6ND counts (the exact count is what was held fixed), which is why C is read at the vertex.", ""]
    crow = []
    for key, ncol, ccol, lab in CONVENTIONS:
        r2 = A2.get(key)
        if r2:
            crow.append((lab, fmt_ci(r2["a"], r2["a_ci"]), fmt_ci(r2["b"], r2["b_ci"]),
                         ", ".join(f"{p['N']:,.0f}" for p in r2["pts"])))
    if A3n:
        crow.append(("approach 3 with N non-embedding", fmt_ci(A3n["a"], A3n["ci"]["a"]),
                     fmt_ci(A3n["b"], A3n["ci"]["b"]),
                     f"α = {A3n['alpha']:.3f}, β = {A3n['beta']:.3f}, E = {A3n['E']:.3f}"))
    L.append(c.md_table(crow, [("convention", lambda r: r[0]), ("a", lambda r: r[1]), ("b", lambda r: r[2]),
                               ("N_opt per budget / fit", lambda r: r[3])]))
    L.append("")
    return L


def vertices(res):
    if not res:
        return []
    L = ["## The IsoFLOP vertices", "",
          c.md_table(res["pts"], [("budget (FLOPs)", lambda p: f"{p['budget']:.3g}"),
                                  ("C at vertex", lambda p: f"{p['C']:.3g}"),
                                  ("N_opt", lambda p: f"{p['N']:,.0f}"), ("D_opt", lambda p: f"{p['D']:,.0f}"),
                                  ("D/N", lambda p: f"{p['D'] / p['N']:.1f}"), ("loss at vertex", lambda p: f"{p['L']:.4f}"),
                                  ("curvature (per ln N²)", lambda p: f"{p['coef'][0]:.4f}"),
                                  ("vertex inside the grid", lambda p: "yes" if p["inside"] else "NO")]), "",
          "Leave one budget out (slopes of the other vertices): "
          + "; ".join(f"without {p['budget']:.3g}: a = {slopes([q for q in res['pts'] if q is not p])[0]:.3f}, "
                      f"b = {slopes([q for q in res['pts'] if q is not p])[1]:.3f}"
                      for p in res["pts"]) + ("." if len(res["pts"]) > 2 else "") if len(res["pts"]) > 2 else "",
          "",
          f"Scatter of the runs about their parabolas: rms {res['resid_rms']:.4f} nats/byte. Bootstrap "
          f"resamples in which some parabola opened downward (dropped): {res['failed']}."
          + (f" Budgets left out because their parabola has no minimum: "
             f"{', '.join(f'{b:.3g}' for b in res['dropped'])}." if res["dropped"] else ""), ""]
    return L


def lr_section(rows, meta):
    L = ["## Learning rate", ""]
    for p in meta.get("lr_points") or []:
        L.append(f"- Sweep at L={p[0]}, C={p[1]} (N = {p[3]:,}) at {p[2]:.3g} FLOPs: best peak lr {p[4]:.4g} (a parabola "
                 "in ln lr through the best run and up to two neighbours on each side).")
    L.append("- Every size: Kaplan's eq. D.1, lr ∝ 0.003239 − 0.0001395 ln N (N non-embedding), with its level "
             "the least-squares fit in ln lr to the optima above. The lr_check runs try 0.5x and 2x the rule's lr "
             "at the middle budget's centre model.")
    L.append("")
    sw = [r for r in rows if r["phase"] in ("lr_sweep", "lr_check")]
    if sw:
        L.append(c.md_table(sw, [("phase", lambda r: r["phase"]), ("L", lambda r: r["L"]), ("C", lambda r: r["C"]),
                                 ("N", lambda r: f"{int(r['N_total']):,}"), ("steps", lambda r: r["steps"]),
                                 ("lr", lambda r: r["lr"]), ("val loss", lambda r: c.na(r.get("val_loss"))),
                                 ("status", lambda r: r["status"])]))
        L.append("")
    return L


def runs_table(iso):
    return ["## Every IsoFLOP run", "",
          c.md_table(iso, [("budget", lambda r: r["budget"]), ("L", lambda r: r["L"]), ("heads", lambda r: r["NH"]),
                           ("C", lambda r: r["C"]), ("seed", lambda r: r["seed"]),
                           ("N non-emb.", lambda r: f"{int(r['N_nonembed']):,}"),
                           ("N total", lambda r: f"{int(r['N_total']):,}"), ("steps", lambda r: r["steps"]),
                           ("tokens", lambda r: f"{int(r['tokens']):,}"), ("epochs", lambda r: r["epochs"]),
                           ("exact / 6ND", lambda r: f"{float(r['C_exact']) / float(r['C_6ND_nonembed']):.2f}"),
                           ("lr", lambda r: r["lr"]), ("val loss", lambda r: r["val_loss"]),
                           ("s", lambda r: r["seconds"])]), ""]


def results_md(rows, G, A2, A3, A3n, out, a, meta):
    iso = [r for r in rows if r["phase"] == "isoflop" and r["status"] == "ok"]
    res = A2.get(PRIMARY)
    L = headline(rows, res, A3, a, meta) + side_by_side(iso, G, res, A3) + account(rows, iso, res, A2, A3, out, meta)
    notes = Path(out) / "notes.md"  # how the run was made, where that is more than its command (kept by hand)
    if notes.is_file():
        L += notes.read_text().rstrip().splitlines() + [""]
    L += conventions(A2, A3n)
    for img, cap in (("isoflop.png", "IsoFLOP profiles"), ("nopt_vs_c.png", "N_opt and D_opt against C"),
                     ("frontier.png", "loss frontier"), ("lnd_fit.png", "L(N, D) fit")):
        L += [f"![{cap}]({img})", ""]
    L += vertices(res) + lr_section(rows, meta) + runs_table(iso)
    (out / "results.md").write_text("\n".join(L) + "\n")
    return L


def analyse(rows, out, a, meta):
    out = Path(out)
    quick = bool(getattr(a, "quick", False))
    nb = getattr(a, "bootstrap", 2000)
    rng = np.random.default_rng(12345)
    G = fit.groups(rows)
    A2 = {}
    for key, ncol, ccol, _ in CONVENTIONS:
        r = fit.approach2(G, ncol, ccol, nb, rng) if len(G) >= 2 else None
        if r:
            A2[key] = r
            c.progress(f"approach 2 [{key}]: a = {fmt_ci(r['a'], r['a_ci'])}, b = {fmt_ci(r['b'], r['b_ci'])}")
    A3 = A3n = None
    if sum(len(v) for v in G.values()) >= 6:
        nb3 = min(nb, 10 if quick else 200)
        A3 = fit.approach3(G, fit.PRIMARY_N, nb3, rng, quick)
        A3n = fit.approach3(G, "N_nonembed", nb3, rng, quick)
        c.progress(f"approach 3: alpha = {fmt_ci(A3['alpha'], A3['ci']['alpha'])}, "
                   f"beta = {fmt_ci(A3['beta'], A3['ci']['beta'])}, E = {fmt_ci(A3['E'], A3['ci']['E'])}, "
                   f"a = {fmt_ci(A3['a'], A3['ci']['a'])}")
    plots.plot_isoflop(G, A2, out / "isoflop.png")
    plots.plot_nopt(A2, A3, out / "nopt_vs_c.png")
    plots.plot_frontier(rows, A2, A3, out / "frontier.png")
    plots.plot_lnd(G, A3, out / "lnd_fit.png")
    results_md(rows, G, A2, A3, A3n, out, a, meta)
    return A2, A3
