#!/usr/bin/python3
"""gpt plan on published runs, and its search time: for GPT-175B on 128 A100s (PyTorch FSDP's paper), fairseq's
13B on 8 V100s and llm.c's GPT-2 124M on 8 A100s, what the plan picks at the published global batch, against
the published configuration priced by the same time model (gpt memplan --time); then the search time of
d48 at 64 ranks and GPT-175B at 1024 ranks (median of --repeats runs).

  scripts/scaling/plan_published.py [--repeats 3] [--out DIR] [--quick]
Writes OUT/published.csv, OUT/search_times.csv and OUT/published.md.
"""
import json
import statistics
import subprocess
import time

import common as c

NAME = "plan"
HW = "data/hardware/"
GPT175 = ["--n-layer", "96", "--n-head", "96", "--d-model", "12288", "--vocab", "50000", "--seq-len", "2048"]
FAIRSEQ13 = ["--n-layer", "40", "--n-head", "40", "--d-model", "5120", "--vocab", "50257", "--seq-len", "2048"]
# (name, source, model flags, world, T, total batch, hardware, budget, published flags, attention)
CASES = [
    ("gpt175b-128xa100", "PyTorch FSDP paper (arXiv 2304.11277) sec. 5.4: FULL_SHARD, activation checkpointing, "
     "batch 1 per GPU", GPT175, 128, 2048, 128 * 2048, "a100_80gb_roce.json", None,
     "--shard full --recompute full --offload none --wrap block --gather-slots 2 -B 1", "simple"),
    ("fairseq13b-8xv100", "fairseq examples/fully_sharded_data_parallel: --cpu-offload --checkpoint-activations, "
     "batch 8 per GPU; 256 GB of host memory on the node", FAIRSEQ13, 8, 2048, 64 * 2048,
     "v100_32gb_8gpu_shared_host.json", "32GiB,32GB",
     "--shard full --recompute full --offload params --wrap block --gather-slots 2 -B 8", "simple"),
    ("llmc-gpt2-124m-8xa100", "llm.c discussion #481: ZeRO-1, micro-batch 64, 524288 tokens per step",
     ["--config", "d12"], 8, 1024, 524288, "a100_80gb.json", None,
     "--shard grad_op --recompute none --offload none --wrap block --gather-slots 2 -B 64", "fused"),
]
SEARCHES = [("d48 at 64 A100s", ["--config", "d48"], 64, 1024, 524288, "a100_80gb.json"),
            ("GPT-175B at 1024 A100s", GPT175, 1024, 2048, 2048 * 2048, "a100_80gb.json")]


def parse():
    p = c.base_parser(NAME, __doc__.splitlines()[0])
    p.add_argument("--repeats", type=int, default=3)
    a = p.parse_args()
    if a.quick:
        a.repeats = 1
    if a.repeats < 1:
        raise c.UserError("--repeats must be >= 1")
    a.gpt = c.check_gpt(a.gpt)
    return a


def gpt_json(a, argv):
    p = subprocess.run([a.gpt] + argv + ["--json"], capture_output=True, text=True, timeout=a.timeout)
    j = c.last_json(p.stdout) if p.returncode == 0 else None
    if j is None:
        raise c.UserError(f"gpt {' '.join(argv[:1])} failed: {c.last_error_line(p.stderr + p.stdout)}")
    return j


def case_row(a, case):
    name, source, model, world, T, total, hw, budget, theirs, attention = case
    hwf = str(c.REPO / HW / hw)
    plan = gpt_json(a, ["plan", *model, "--world", str(world), "-T", str(T), "--total-batch", str(total),
                        "--hardware", hwf, "--attention", attention, "--top", "3",
                        *(["--budget", budget] if budget else [])])
    mine = gpt_json(a, ["memplan", "--device", "cuda", *model, "--world", str(world), "-T", str(T), "--total-batch",
                        str(total), *theirs.split(), "--attention", attention, "--time", "--hardware", hwf])
    best = plan["top"][0]
    pub_tps = mine["time"]["tokens_per_s"]
    return {"case": name, "source": source, "world": world, "hardware": hw, "budget": budget or "the file's",
            "published_flags": theirs, "published_predicted_tokens_per_s": round(pub_tps, 1),
            "published_device_peak_gib": round(mine["device_peak_bytes"] / 2**30, 2),
            "plan_flags": best["flags"], "plan_tokens_per_s": round(best["tokens_per_s"], 1),
            "plan_mfu": round(best["mfu"], 3), "plan_device_peak_gib": round(best["device_peak_bytes"] / 2**30, 2),
            "plan_host_peak_gib": round(best["host_peak_bytes"] / 2**30, 2),
            "plan_over_published": round(best["tokens_per_s"] / pub_tps, 3),
            "space": plan["stats"]["space"], "search_s": round(plan["stats"]["search_s"], 2), "why": plan["why"]}


def search_row(a, s):
    name, model, world, T, total, hw = s
    times, stats = [], None
    for _ in range(a.repeats):
        t0 = time.time()
        j = gpt_json(a, ["plan", *model, "--world", str(world), "-T", str(T), "--total-batch", str(total),
                         "--hardware", str(c.REPO / HW / hw)])
        times.append(time.time() - t0)
        stats = j["stats"]
    return {"search": name, "space": stats["space"], "no_fit": stats["no_fit"], "dominated": stats["dominated"],
            "bounded": stats["bounded"], "priced": stats["priced"], "bound_sims": stats["bound_sims"],
            "search_s_median": round(statistics.median(times), 2), "search_s_max": round(max(times), 2),
            "repeats": a.repeats}


def main():
    a = parse()
    out = c.out_dir(a, NAME)
    rows = []
    for case in CASES:
        rows.append(case_row(a, case))
        c.progress(json.dumps(rows[-1]))
    searches = []
    for s in SEARCHES:
        searches.append(search_row(a, s))
        c.progress(json.dumps(searches[-1]))
    c.write_csv(out / "published.csv", rows, list(rows[0].keys()))
    c.write_csv(out / "search_times.csv", searches, list(searches[0].keys()))
    code = lambda k: (lambda r: f"`{r[k]}`")
    lines = ["# What gpt plan picks for published runs", "",
             "Each published configuration is priced by the same time model (`gpt memplan --time`, the hardware "
             "file named) at the published global batch; the plan searches that model, world and batch. The ratio "
             "is predicted against predicted: both sides carry the model's errors (docs/results/time_model/).", "",
             c.md_table(rows, [("case", lambda r: r["case"]), ("published config", code("published_flags")),
                               ("its tokens/s (predicted)", lambda r: r["published_predicted_tokens_per_s"]),
                               ("plan's first", code("plan_flags")), ("tokens/s", lambda r: r["plan_tokens_per_s"]),
                               ("MFU", lambda r: r["plan_mfu"]),
                               ("device / host GiB", lambda r: f"{r['plan_device_peak_gib']} / {r['plan_host_peak_gib']}"),
                               ("plan / published", lambda r: f"**{r['plan_over_published']}**"),
                               ("searched", lambda r: f"{r['space']} in {r['search_s']} s")]), "",
             *[f"- **{r['case']}**: {r['source']}; hardware {r['hardware']}, budget {r['budget']}. {r['why']}." for r in rows],
             "", "## Search time", "",
             c.md_table(searches, [(k, lambda r, k=k: r[k]) for k in searches[0]]), "",
             "Wall time of the whole `gpt plan` process on this machine (2 cores), median of the repeats.", "",
             f"Command: `{c.command_line()}`", ""]
    (out / "published.md").write_text("\n".join(lines))
    c.progress(f"wrote {out / 'published.md'}")


if __name__ == "__main__":
    c.main_guard(main)
