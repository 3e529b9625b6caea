#!/usr/bin/python3
"""gpt plan against this machine: for each scenario (model x ranks x memory budget), the plan's top 5 and 5
others drawn from the feasible space (gpt plan --sample), each measured with gpt bench in interleaved rounds.
Checks, per scenario, that the plan's first choice is within 10% of the best measured tokens/s and that the
best measured is in the plan's top 3.

The race: where the best measured (by median over the rounds) is outside the plan's top 3, every candidate
outside the top 3 whose median beats the best of the top 3 is raced against that one in --race-rounds fresh
paired rounds (each round times all of them back to back, in rotating order). A contender that is faster in
more of those rounds than a fair coin allows (one-sided sign test, p < 0.05: 15 of 20) is measurably faster,
and the scenario fails; one that is not is reported as a tie at the measured ratio and its 95% interval
(scripts/scaling/paired_race.py). The rounds' medians alone cannot order candidates predicted within 1-2% of
each other on this machine, where one configuration's runs spread over +-20%.

  scripts/scaling/plan_check.py [--rounds 7] [--race-rounds 20] [--steps 4] [--ranks 1,2,4] [--out DIR] [--quick]
Writes OUT/plan_check.csv, OUT/plan_check.md and OUT/plan_check.png (run log and hardware file in OUT/work/).
The hardware file is this machine's calibration at each rank count of the scenarios run (1 rank x 2 threads,
2 and 4 ranks x 1 thread), made first. At 4 ranks the plan's space holds the tensor-parallel sizes 1, 2 and 4.
"""
import math
import random
import statistics

import common as c
import paired_race

NAME = "plan_check"
# (name, config, ranks, T, sequences per step, budget f): with f, the per-rank budget is min + f x (free - min),
# where free is what the unconstrained plan's first choice needs and min the least budget anything fits
SCENARIOS = [
    ("d4, 1 rank, no budget", "d4", 1, 128, 16, None),
    ("d4, 1 rank, budget f=0.3", "d4", 1, 128, 16, 0.3),
    ("d4, 2 ranks, no budget", "d4", 2, 128, 16, None),
    ("d6, 2 ranks, budget f=0.5", "d6", 2, 128, 16, 0.5),
    ("d2, 2 ranks, T=32, no budget", "d2", 2, 32, 32, None),
    ("d6, 2 ranks, T=64, budget f=0.1", "d6", 2, 64, 32, 0.1),
    # 4 ranks: the plan searches --tp 1, 2 and 4 (d4 has 4 heads) with sequence parallelism on and off
    ("d4, 4 ranks, no budget", "d4", 4, 128, 16, None),
    ("d4, 4 ranks, 2 sequences a step", "d4", 4, 128, 2, None),  # 2 data-parallel ranks at most: --tp 2 or 4
    ("d4, 4 ranks, T=64, budget f=0.1", "d4", 4, 64, 32, 0.1),
]
VOCAB = ["--vocab", str(c.BYTE_VOCAB)]


def parse():
    p = c.base_parser(NAME, __doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--steps", type=int, default=4, help="least timed steps per gpt bench (after its warm-up step)")
    p.add_argument("--seconds", type=float, default=2.0,
                   help="timed seconds each gpt bench aims for: its steps are raised to this at the predicted speed, "
                        "so that a fast candidate is not timed over a few milliseconds")
    p.add_argument("--race-rounds", type=int, default=20,
                   help="paired rounds racing a contender from outside the top 3 against the top 3's best "
                        "(0: no race, else at least 5)")
    p.add_argument("--top", type=int, default=5)
    p.add_argument("--others", type=int, default=5, help="candidates drawn from the rest of the feasible space")
    p.add_argument("--ranks", default="1,2,4", help="run the scenarios at these rank counts only (comma-separated)")
    a = p.parse_args()
    try:
        ranks = {int(n) for n in a.ranks.split(",")}
    except ValueError:
        raise c.UserError(f"--ranks '{a.ranks}': expected comma-separated rank counts, e.g. 1,2,4")
    a.scenarios = [sc for sc in SCENARIOS if sc[2] in ranks]
    if not a.scenarios:
        raise c.UserError(f"--ranks '{a.ranks}': no scenario runs at these rank counts (they run at 1, 2 and 4)")
    if a.quick:  # one scenario (d2 on 2 ranks, else the first at --ranks), 2 + 1 candidates, one round
        a.scenarios = [sc for sc in a.scenarios if sc == SCENARIOS[4]] or a.scenarios[:1]
        a.rounds, a.steps, a.top, a.others, a.seconds = 1, 1, 2, 1, 0
        a.race_rounds = 2
    if a.rounds < 1 or a.steps < 1 or a.top < 3 and not a.quick or a.others < 0 or a.seconds < 0 \
            or a.race_rounds < 0:
        raise c.UserError("--rounds and --steps must be >= 1, --top >= 3, --others, --seconds and --race-rounds >= 0")
    if 0 < a.race_rounds < 5 and not a.quick:  # fewer paired rounds could never reach p < 0.05: a race that cannot fail
        raise c.UserError(f"--race-rounds {a.race_rounds}: a sign test over fewer than 5 rounds can never find a "
                          "contender faster (p >= 1/16); give 0 (no race) or at least 5")
    a.gpt = c.check_gpt(a.gpt)
    c.check_ranks(sorted({sc[2] for sc in a.scenarios}), "scenarios", c.MAX_RANKS, a.mpiexec)
    return a


def env_for(n):
    env = c.mpi_env(max(1, 2 // n))  # the machine's 2 cores shared by the ranks
    env["OMPI_MCA_mpi_yield_when_idle"] = "1"
    return env


def calibrate(a, hw, log, cache):
    for n in sorted({sc[2] for sc in a.scenarios}):
        c.progress(f"calibrating {n} rank(s) into {hw.name}")
        env = env_for(n)
        env["GPT_CACHE_DIR"] = cache
        rc, _, txt = c.run(c.launch(a, n, [a.gpt, "bench", "--calibrate", "--out", str(hw),
                                           *(["--quick"] if a.quick else [])]), env, a.timeout, log)
        if rc != 0:
            raise c.UserError(f"calibration at {n} rank(s) failed: {txt.strip()[-300:]}")


def plan(a, hw, sc, budget, log, top, others, must=True):
    name, cfg, n, T, seqs, _ = sc
    argv = [a.gpt, "plan", "--config", cfg, *VOCAB, "--world", str(n), "-T", str(T), "--hardware", str(hw),
            "--total-batch", str(seqs * T), "--top", str(top), "--sample", str(others), "--seed", "7", "--json"]
    if budget:
        argv += ["--budget", str(budget)]
    rc, _, txt = c.run(argv, env_for(n), a.timeout, log)
    j = c.last_json(txt) if rc == 0 else None
    if j is None and must:
        raise c.UserError(f"gpt plan for '{name}' failed: {c.last_error_line(txt)}")
    return j


def least_budget(a, hw, sc, log, hi):
    """The smallest per-rank budget (bytes, to 1%) at which gpt plan finds anything that fits."""
    lo = 0
    while hi - lo > hi // 100:
        mid = (lo + hi) // 2
        if plan(a, hw, sc, mid, log, 1, 0, must=False):
            hi = mid
        else:
            lo = mid
    return hi


def steps_for(a, sc, predicted_tokens_per_s):
    """Timed steps for about a.seconds at the predicted speed, and at least a.steps."""
    _, _, _, T, seqs, _ = sc
    return max(a.steps, math.ceil(a.seconds * predicted_tokens_per_s / (seqs * T)))


def measure(a, sc, x, log, cache):
    name, cfg, n, T, seqs, _ = sc
    flags = x["flags"]
    env = env_for(n)
    env["GPT_CACHE_DIR"] = cache
    x["steps"] = steps_for(a, sc, x["tokens_per_s"])
    argv = [a.gpt, "bench", "--config", cfg, *VOCAB, *flags.split(), "--steps", str(x["steps"]), "--json"]
    rc, _, txt = c.run(c.launch(a, n, argv), env, a.timeout, log)
    j = c.last_json(txt) if rc == 0 else None
    if j is None:
        raise c.UserError(f"gpt bench for '{name}' ({flags}) failed: {c.last_error_line(txt)}")
    return j["tokens_per_s"]


def scenario_plans(a, hw, log):
    plans = []
    for sc in a.scenarios:
        free = plan(a, hw, sc, None, log, 1, 0)
        budget = None
        if sc[5]:
            need = free["top"][0]["device_need_bytes"]
            least = least_budget(a, hw, sc, log, need)
            budget = int(least + sc[5] * (need - least))
        j = plan(a, hw, sc, budget, log, a.top, a.others)
        cands = [dict(x, source=f"plan #{x['rank']}") for x in j["top"]] + \
                [dict(x, source="feasible sample") for x in j["sample"]]
        plans.append({"scenario": sc, "budget": budget, "plan": j, "cands": cands})
        c.progress(f"{sc[0]}: budget {c.na(budget)} B, #1 {j['top'][0]['flags']} "
                   f"(space {j['stats']['space']}, {j['stats']['search_s']:.3f} s)")
    return plans


def in_top3(x):
    return x["source"].startswith("plan") and x["rank"] <= 3


def race(a, p, log, cache):
    """Races the candidates outside the top 3 whose median beats the top 3's best against it (module doc).
    Returns (the top 3's best, [(contender, paired_race verdict)]), or None when nothing outside beats it."""
    top3 = [x for x in p["cands"] if in_top3(x)]
    if not top3 or a.race_rounds == 0:
        return None
    y = max(top3, key=lambda x: x["measured_median"])
    rivals = [x for x in p["cands"] if not in_top3(x) and x["measured_median"] > y["measured_median"]]
    if not rivals:
        return None
    runs = [y] + rivals
    for x in runs:
        x["race"] = []
    for r in range(a.race_rounds):
        for x in runs[r % len(runs):] + runs[:r % len(runs)]:
            x["race"].append(measure(a, p["scenario"], x, log, cache))
        c.progress(f"race {r + 1}/{a.race_rounds}: {p['scenario'][0]}: " +
                   ", ".join(f"{x['source']} {x['race'][-1]:.0f}" for x in runs))
    return y, [(x, paired_race.race_verdict(x["race"], y["race"])) for x in rivals]


def race_text(p):
    if p.get("race") is None:
        return ""
    y, results = p["race"]
    return "; ".join(f"{x['source']} against {y['source']}: faster in {v['wins']} of {v['rounds']} paired rounds "
                     f"(p = {v['p']:.3f}), ratio {v['ratio']:.3f} [{v['ratio_lo']:.3f}, {v['ratio_hi']:.3f}]"
                     for x, v in results)


def verdicts(plans):
    rows, checks = [], []
    for p in plans:
        best = max(p["cands"], key=lambda x: x["measured_median"])
        first = p["cands"][0]
        within = first["measured_median"] / best["measured_median"]
        if in_top3(best):
            top3 = "in the top 3"
        elif p.get("race") and not any(v["faster"] for _, v in p["race"][1]):
            top3 = "tie: not measurably faster than the top 3's best"
        else:
            top3 = "NO: measurably faster than the top 3" if p.get("race") else "NO (not raced)"
        ok = within >= 0.9 and not top3.startswith("NO")
        # whether the rounds can tell the best from the plan's first at all: their ranges over rounds overlap
        overlap = min(first["measured"]) <= max(best["measured"]) and min(best["measured"]) <= max(first["measured"])
        checks.append({"scenario": p["scenario"][0], "budget_bytes": p["budget"] or "none",
                       "plan_first": first["flags"], "first_tp": first["tp"], "best_tp": best["tp"],
                       "first_over_best": round(within, 3),
                       "best_measured": best["source"], "first_and_best_ranges_overlap": "yes" if overlap else "no",
                       "best_in_top_3": top3, "race": race_text(p),
                       "search_s": round(p["plan"]["stats"]["search_s"], 3),
                       "space": p["plan"]["stats"]["space"], "pass": "yes" if ok else "NO"})
        for x in p["cands"]:
            rows.append({"scenario": p["scenario"][0], "source": x["source"], "tp": x["tp"], "flags": x["flags"],
                         "predicted_tokens_per_s": round(x["tokens_per_s"], 1),
                         "measured_tokens_per_s": round(x["measured_median"], 1),
                         "measured_min": round(min(x["measured"]), 1), "measured_max": round(max(x["measured"]), 1),
                         "timed_steps": x["steps"],
                         "device_need_bytes": x["device_need_bytes"]})
    return rows, checks


def plot(plans, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cols = min(3, len(plans))
    rws = (len(plans) + cols - 1) // cols
    fig, axes = plt.subplots(rws, cols, figsize=(5.2 * cols, 3.6 * rws), squeeze=False)
    for ax, p in zip(axes.flat, plans):
        xs = range(len(p["cands"]))
        med = [x["measured_median"] for x in p["cands"]]
        ax.bar(xs, med, color=["C0" if x["source"].startswith("plan") else "C7" for x in p["cands"]],
               yerr=[[m - min(x["measured"]) for m, x in zip(med, p["cands"])],
                     [max(x["measured"]) - m for m, x in zip(med, p["cands"])]], capsize=3,
               label="measured (median, range over rounds)")
        ax.plot(xs, [x["tokens_per_s"] for x in p["cands"]], "k_", ms=14, mew=2, ls="none", label="predicted")
        ax.set_xticks(list(xs))
        ax.set_xticklabels([x["source"].replace("plan ", "").replace("feasible sample", "s") for x in p["cands"]])
        ax.set_title(p["scenario"][0], fontsize=9)
        ax.set_ylabel("tokens/s")
    for ax in list(axes.flat)[len(plans):]:
        ax.axis("off")
    axes.flat[0].legend(fontsize=7)
    fig.suptitle("gpt plan: its top 5 (blue, #1-#5) and 5 feasible others (grey, s), measured with gpt bench", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def table(rows):
    return c.md_table(rows, [(k, lambda r, k=k: f"`{r[k]}`" if k.endswith("flags") or k == "plan_first" else r[k])
                             for k in rows[0]])


def main():
    a = parse()
    out = c.out_dir(a, NAME)
    work = out / "work"
    work.mkdir(parents=True, exist_ok=True)
    log = work / "run.log"
    log.write_text("")
    cache = str(work / "cache")
    hw = work / "hardware.json"
    if hw.exists():
        hw.unlink()
    calibrate(a, hw, log, cache)
    plans = scenario_plans(a, hw, log)
    jobs = [(p, x) for p in plans for x in p["cands"]]
    for x in (x for _, x in jobs):
        x["measured"] = []
    rng = random.Random(11)
    for r in range(a.rounds):
        rng.shuffle(jobs)  # interleaved: every round measures every candidate, in a new order
        for i, (p, x) in enumerate(jobs):
            x["measured"].append(measure(a, p["scenario"], x, log, cache))
            c.progress(f"round {r + 1}/{a.rounds} run {i + 1}/{len(jobs)}: {p['scenario'][0]} {x['source']}: "
                       f"{x['measured'][-1]:.0f} tokens/s (predicted {x['tokens_per_s']:.0f})")
    for x in (x for _, x in jobs):
        x["measured_median"] = statistics.median(x["measured"])
    for p in plans:
        p["race"] = race(a, p, log, cache)
    rows, checks = verdicts(plans)
    c.write_csv(out / "plan_check.csv", rows, list(rows[0].keys()))
    c.write_csv(out / "plan_check_verdicts.csv", checks, list(checks[0].keys()))
    firsts = {ch["plan_first"] for ch in checks}
    lines = [f"# gpt plan on this machine: {len(plans)} scenarios, {a.rounds} interleaved round(s) of gpt bench "
             f"(timed steps: about {a.seconds:g} s at the predicted speed, at least {a.steps})", "",
             "Each scenario: a model, a rank count and a per-rank memory budget (a fraction of what the "
             "unconstrained plan's first choice needs, pre-flight margin included). The plan's top "
             f"{a.top} and {a.others} others drawn at random from the feasible space (`gpt plan --sample`) are "
             "measured; the check is that the plan's first is within 10% of the best measured and that the best "
             "measured is in the plan's top 3. `first_and_best_ranges_overlap` says whether the plan's first and the "
             "best measured overlap in their range over the rounds (when they do, the rounds cannot order the two).",
             "",
             f"Where the best measured is outside the top 3, it (and any other candidate outside the top 3 whose "
             f"median beats the top 3's best) is raced against the top 3's best in {a.race_rounds} fresh paired "
             "rounds (both timed back to back in each round, order rotating): it fails the scenario if it is faster "
             f"in more rounds than a fair coin allows (one-sided sign test, p < {paired_race.ALPHA}), and is a tie "
             "otherwise. `race` gives its wins, p, and the median paired ratio of tokens/s with its 95% interval "
             "(order statistics); scripts/scaling/paired_race.py.",
             "",
             table(checks), "",
             f"Distinct first choices over the scenarios: {len(firsts)} of {len(checks)}.", "",
             "Every candidate (tokens/s over all ranks):", "", table(rows), "",
             "![plan check](plan_check.png)", "", f"Command: `{c.command_line()}`", ""]
    (out / "plan_check.md").write_text("\n".join(lines))
    plot(plans, out / "plan_check.png")
    c.progress(f"wrote {out / 'plan_check.md'}")
    for ch in checks:
        c.progress(f"{ch['scenario']}: first/best {ch['first_over_best']}, best measured {ch['best_measured']} "
                   f"({ch['best_in_top_3']}{': ' + ch['race'] if ch['race'] else ''}): {ch['pass']}")


if __name__ == "__main__":
    c.main_guard(main)
