#!/usr/bin/python3
"""gpt plan on published runs, and its search time: for GPT-175B on 128 A100s (PyTorch FSDP's paper), fairseq's
13B on 8 V100s and llm.c's GPT-2 124M on 8 A100s, what the plan picks at the published global batch, against
the published configuration priced by the same time model (gpt memplan --time); then the mesh the plan picks
(tensor-parallel size T x data-parallel ranks) for two published 2D runs, GPT-3 175B on 1024 A100s at a batch of
1536 (Megatron-LM) and Llama-70B-sized blocks on 256 H100s (torchtitan), beside the published mesh and its
measured tokens/s; then the search time of d48 at 64 ranks, GPT-175B at 1024 ranks and the two 2D cases (median
of --repeats runs).

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
GPT3_175 = ["--n-layer", "96", "--n-head", "96", "--d-model", "12288", "--vocab", "51200", "--seq-len", "2048"]
# Llama 2/3 70B's blocks as GPT blocks: 80 layers, hidden 8192, 64 heads (ours: no grouped-query attention, a 4C
# GELU MLP of 2 matrices where Llama's SwiGLU has 3 of 28672: 12 C^2 a layer against Llama's 12.75 C^2)
LLAMA70 = ["--n-layer", "80", "--n-head", "64", "--d-model", "8192", "--vocab", "128256", "--seq-len", "8192"]


def megatron_tokens_per_s(tflops, gpus, L, h, s, V):
    """Tokens/s from Megatron-LM's TFLOP/s per GPU, counted as its paper does (arXiv 2104.04473, eq. 3):
    96 B s l h^2 (1 + s/6h + V/16lh) per iteration, recompute included."""
    return tflops * 1e12 * gpus / (96 * L * h * h * (1 + s / (6 * h) + V / (16 * L * h)))


# (name, source, model flags, world, T, total batch, hardware, published mesh, its T, published tokens/s,
#  published flags as ours can run it or None, differences, whether to plan pinned to the published T: where no
#  flags of ours run the published mesh)
MESH_CASES = [
    ("gpt3-175b-1024xa100-b1536",
     "Narayanan et al., 'Efficient Large-Scale Language Model Training on GPU Clusters Using Megatron-LM', arXiv "
     "2104.04473, sec. 5.1: GPT-3 175B on 1024 A100s at batch 1536, 140 TFLOP/s per GPU (recompute counted); the "
     "mesh of Megatron-LM's examples/gpt3/train_gpt3_175b_distributed.sh (128 nodes of 8)",
     GPT3_175, 1024, 2048, 1536 * 2048, "a100_80gb.json", "T=8 x pipeline 16 x data 8, micro-batch 1", 8,
     megatron_tokens_per_s(140, 1024, 96, 12288, 2048, 51200), None,
     "pipeline parallelism, which ours does not have, holds the published run's weights at 1/128 per GPU without "
     "gathering them: no flags of ours run that mesh, so its row is the plan pinned to --tp 8", True),
    ("llama70b-blocks-256xh100",
     "torchtitan docs/performance.md, Table 4: Llama 3.1 70B on 256 H100s (96 GB HBM2e at 500 W), FSDP 32 x TP 8, "
     "local batch 16, global 512, sequence 8192, full activation checkpointing, torch.compile and Float8 "
     "(829 tokens/s per GPU)",
     LLAMA70, 256, 8192, 512 * 8192, "h100.json", "FSDP 32 x TP 8, local batch 16, full recompute", 8, 829.0 * 256,
     "--tp 8 --shard full --recompute full --offload none --wrap block -B 16",
     "Float8 linears and 96 GB of slower HBM2e at 500 W on the published side; Llama's blocks (grouped-query "
     "attention, SwiGLU) priced as GPT blocks of the same width and depth", False),
]

SEARCHES = [("d48 at 64 A100s", ["--config", "d48"], 64, 1024, 524288, "a100_80gb.json"),
            ("GPT-175B at 1024 A100s", GPT175, 1024, 2048, 2048 * 2048, "a100_80gb.json"),
            ("GPT-3 175B at 1024 A100s, batch 1536", GPT3_175, 1024, 2048, 1536 * 2048, "a100_80gb.json"),
            ("Llama-70B-sized at 256 H100s", LLAMA70, 256, 8192, 512 * 8192, "h100.json")]


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


def why_not(plan):
    """Each other T's "why", with how much of it was priced where its fastest is not exact (gpt plan's text says so
    too): the rest were bounded out, and a faster one may be among them."""
    return "; ".join(o["why"] + ("" if o["exact"] else f" (the fastest of the {o['priced']} of its {o['candidates']} "
                                 "priced; the rest bounded out)") for o in plan["other_tp"] if o["why"])


def mesh_row(a, case):
    name, source, model, world, T, total, hw, mesh, their_tp, their_tps, theirs, diff, pin = case
    hwf = str(c.REPO / HW / hw)
    common = [*model, "--world", str(world), "-T", str(T), "--total-batch", str(total), "--hardware", hwf]
    plan = gpt_json(a, ["plan", *common, "--top", "3"])
    best = plan["top"][0]
    at_theirs = {"flags": "", "tokens_per_s": float("nan")}
    if pin:
        at_theirs = gpt_json(a, ["plan", *common, "--top", "1", "--tp", str(their_tp)])["top"][0]
    row = {"case": name, "source": source, "world": world, "hardware": hw, "published_mesh": mesh,
           "published_tokens_per_s": round(their_tps, 1), "tp_searched": plan["tp_searched"],
           "plan_flags": best["flags"], "plan_tp": best["tp"], "plan_dp": best["dp"],
           "plan_tokens_per_s": round(best["tokens_per_s"], 1), "plan_mfu": round(best["mfu"], 3),
           "plan_device_peak_gib": round(best["device_peak_bytes"] / 2**30, 2),
           "plan_over_published": round(best["tokens_per_s"] / their_tps, 3),
           "at_published_tp_flags": at_theirs["flags"],
           "at_published_tp_tokens_per_s": round(at_theirs["tokens_per_s"], 1),
           "at_published_tp_over_published": round(at_theirs["tokens_per_s"] / their_tps, 3),
           "published_flags_predicted_tokens_per_s": "", "published_flags_device_peak_gib": "",
           "space": plan["stats"]["space"], "search_s": round(plan["stats"]["search_s"], 2),
           "why": plan["why"], "why_not": why_not(plan),
           "differences": diff}
    if theirs:
        mine = gpt_json(a, ["memplan", "--device", "cuda", *common, *theirs.split(), "--time"])
        row["published_flags_predicted_tokens_per_s"] = round(mine["time"]["tokens_per_s"], 1)
        row["published_flags_device_peak_gib"] = round(mine["device_peak_bytes"] / 2**30, 2)
    return row


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
    meshes = []
    for case in MESH_CASES:
        meshes.append(mesh_row(a, case))
        c.progress(json.dumps(meshes[-1]))
    searches = []
    for s in SEARCHES:
        searches.append(search_row(a, s))
        c.progress(json.dumps(searches[-1]))
    c.write_csv(out / "published.csv", rows, list(rows[0].keys()))
    c.write_csv(out / "search_times.csv", searches, list(searches[0].keys()))
    c.write_csv(out / "meshes.csv", meshes, list(meshes[0].keys()))
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
             "", "## The mesh: published 2D runs", "",
             "The plan searches the tensor-parallel size T with every other lever (`tp_searched`); beside it, the "
             "plan pinned to the published run's T, and where our flags can run the published mesh, that mesh "
             "priced by the same model. The published tokens/s are measured, ours predicted: the ratio carries the "
             "model's error (docs/results/time_model/) and the differences listed.", "",
             c.md_table(meshes, [("case", lambda r: r["case"]), ("published mesh", lambda r: r["published_mesh"]),
                                 ("published tokens/s (measured)", lambda r: r["published_tokens_per_s"]),
                                 ("T searched", lambda r: r["tp_searched"]),
                                 ("plan's first", code("plan_flags")),
                                 ("T x DP", lambda r: f"{r['plan_tp']} x {r['plan_dp']}"),
                                 ("tokens/s", lambda r: r["plan_tokens_per_s"]),
                                 ("device GiB", lambda r: r["plan_device_peak_gib"]),
                                 ("plan / published", lambda r: f"**{r['plan_over_published']}**"),
                                 ("plan at the published T", lambda r: f"`{r['at_published_tp_flags']}`"
                                  if r["at_published_tp_flags"] else "-"),
                                 ("its tokens/s", lambda r: r["at_published_tp_tokens_per_s"]
                                  if r["at_published_tp_flags"] else "-"),
                                 ("published mesh priced", lambda r: r["published_flags_predicted_tokens_per_s"]
                                  or "not expressible"),
                                 ("searched", lambda r: f"{r['space']} in {r['search_s']} s")]), "",
             *[f"- **{r['case']}**: {r['source']}; hardware {r['hardware']}. {r['why']}. Other T: {r['why_not']}. "
               f"Differences: {r['differences']}." for r in meshes],
             "", "## Search time", "",
             c.md_table(searches, [(k, lambda r, k=k: r[k]) for k in searches[0]]), "",
             "Wall time of the whole `gpt plan` process on this machine (2 cores), median of the repeats.", "",
             f"Command: `{c.command_line()}`", ""]
    (out / "published.md").write_text("\n".join(lines))
    c.progress(f"wrote {out / 'published.md'}")


if __name__ == "__main__":
    c.main_guard(main)
