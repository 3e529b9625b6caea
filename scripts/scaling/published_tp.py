"""Published tensor-parallel runs for time_model_published.py: Megatron-LM's own scaling study (arXiv 1909.08053),
ZeRO-100B as it ran (Megatron model parallelism of 16 under ZeRO-2), and Megatron-LM measured by OneFlow's DLPerf
on 8-V100 DGX-1-class nodes (the hybrid cube mesh, 2 to 16-way tensor parallelism), each restated with --tp.

Kept apart from the other cases because they share their sources and their reading: the section this module
writes compares each TP run with a baseline of the same source (a single GPU, or data parallelism on the same
nodes), so the ratio the compute side shares cancels and what is left is what tensor parallelism costs.
"""
import json
from pathlib import Path

MEGATRON_SOURCE = ("Shoeybi, Patwary, Puri, LeGresley, Casper, Catanzaro, 'Megatron-LM: Training Multi-Billion Parameter "
                   "Language Models Using Model Parallelism', arXiv 1909.08053: abstract; section 4.2 (mixed precision, "
                   "activation checkpointing after every transformer layer, sequences of 1024); section 5 (32 DGX-2H, "
                   "300 GB/s NVSwitch, 100 GB/s between servers with 8 InfiniBand adapters); section 5.1 (vocabulary "
                   "padded to 51,200; batch 8 for the model-parallel runs, 512 for model+data parallel); Table 1; "
                   "Figure 5")
MEGATRON_BASE = 39.0  # TFLOPS of the 1.2B model on one GPU (abstract, section 5.1.1): 30% of a DGX-2H V100's peak
MEGATRON_SHAPES = {  # Table 1: hidden, heads, layers; model-parallel GPUs; Figure 5's weak-scaling efficiency
    "1.2b": (1536, 16, 40, 1, 1.00), "2.5b": (1920, 20, 54, 2, 0.95), "4.2b": (2304, 24, 64, 4, 0.82),
    "8.3b": (3072, 32, 72, 8, 0.77)}
MEGATRON_DIFF = ("2019's Megatron-LM computes with fp16 and dynamic loss scaling (ours bf16 priced at the V100's fp16 "
                 "rates), unfused bias, GeLU, dropout and softmax kernels (the model prices our fused ones) and explicit "
                 "attention like ours; its model parallelism all-reduces the activations (2 per layer forward, 2 "
                 "backward, plus recompute's) and computes the layernorms, residuals and dropout on every rank, as "
                 "ours does with --sequence-parallel off (sequence parallelism came later, arXiv 2205.05198); how the "
                 "paper counts its FLOPs is not "
                 "stated in the sections cited: counted here as in the other rows, 96 B s l h^2 (1 + s/6h + V/16lh) "
                 "per iteration, recompute included, over the T GPUs of a model-parallel group")


def megatron_case(size):
    h, heads, layers, T, eff = MEGATRON_SHAPES[size]
    return {
        "id": f"megatron-{size}-tp{T}" if T > 1 else f"megatron-{size}-1gpu",
        "source": MEGATRON_SOURCE if size == "1.2b" else "arXiv 1909.08053, as megatron-1.2b-1gpu",
        "published": (f"{MEGATRON_BASE:g} TFLOPS sustained on one V100 of a DGX-2H, 30% of its peak (the abstract, "
                      "section 5.1.1): the baseline of every scaling number" if T == 1 else
                      f"{eff:.0%} weak-scaling efficiency against the 1-GPU baseline's {MEGATRON_BASE:g} TFLOPS "
                      f"(Figure 5): {eff * MEGATRON_BASE:.1f} TFLOPS per GPU"),
        "metric": "tflops", "value": eff * MEGATRON_BASE,
        "config": (f"GPT-2 {size.upper()}: {layers} layers, hidden {h}, {heads} heads (Table 1), vocabulary 51,200, "
                   f"sequence 1024, batch 8; {T}-way model parallelism on {T} V100-SXM3-32GB of one DGX-2H "
                   "(NVSwitch); fp16, Adam, activation checkpointing of every layer"),
        "model": ["--n-layer", str(layers), "--n-head", str(heads), "--d-model", str(h), "--vocab", "51200",
                  "--seq-len", "1024"],
        "run": ["--world", str(T), *(["--tp", str(T), "--sequence-parallel", "off"] if T > 1 else []), "-B", "8",
                "-T", "1024", "--shard", "none",
                "--reduce-dtype", "bf16", "--recompute", "full", "--attention", "simple"],
        "hardware": "v100_dgx2h.json",
        "differences": MEGATRON_DIFF + ("" if T == 1 else "; see the tensor-parallel section for the scaling "
                                        "against the 1-GPU row"),
    }


DLPERF_SOURCE = ("OneFlow's DLPerf, reports/GPT/dlperf_gpt_test_report_210512.md (Megatron-LM's sequences/s) and "
                 "Megatron-LM/README.md (cases, scripts/mutil_perf_pretrain_gpt_dp_mp_pp.sh, nvidia-smi topo -m) "
                 "(https://github.com/Oneflow-Inc/DLPerf), May 2021")
DLPERF_CONFIG = ("Megatron-LM (commit 8aa4619, NCCL 2.8.3) with --fp16 --checkpoint-activations, sequence 2048, "
                 "vocabulary 51,200 (the report), {model}; global batch {gb}; {nodes} of 8 V100-SXM2-16GB wired as the "
                 "DGX-1 hybrid cube mesh, one 100 Gb/s EDR InfiniBand HCA per node")
DLPERF_DIFF = ("fp16 and Megatron's unfused kernels of 2020 (ours bf16 at the V100's fp16 rates); Megatron's data "
               "parallelism all-reduces fp16 gradients ({{--shard none}} with 16-bit reductions here: the same bytes) "
               "on its data-parallel group's own NCCL communicator, where ours share one comm stream with the "
               "tensor-parallel collectives; its model parallelism all-reduces the activations and repeats the "
               "layernorms and residuals on every rank, as ours with --sequence-parallel off; dropout and the loss "
               "scaler are not modelled")


def dlperf_case(case_id, name, seqs, dp, tp, model="1536x16", nodes=1, note=""):
    h, layers = (1536, 16) if model == "1536x16" else (3072, 16)
    heads = 16 if h == 1536 else 32
    world = dp * tp
    B = 16 // dp  # every case's global batch is 16 sequences
    return {
        "id": case_id,
        "source": DLPERF_SOURCE if case_id == "dlperf-megatron-dp8" else "the same DLPerf report",
        "published": f"Megatron-LM {seqs:g} sequences/s ({seqs * 2048:.0f} tokens/s) in case {name}{note}",
        "metric": "tokens_per_s", "value": seqs * 2048,
        "config": DLPERF_CONFIG.format(model=f"{layers} layers, hidden {h}, {heads} heads",
                                       gb=f"16 ({dp}-way data parallel x {tp}-way model parallel, micro-batch {B})",
                                       nodes="one node" if nodes == 1 else f"{nodes} nodes"),
        "model": ["--n-layer", str(layers), "--n-head", str(heads), "--d-model", str(h), "--vocab", "51200",
                  "--seq-len", "2048"],
        "run": ["--world", str(world), *(["--tp", str(tp), "--sequence-parallel", "off"] if tp > 1 else []), "-B",
                str(B), "-T", "2048",
                "--shard", "none", "--reduce-dtype", "bf16", "--recompute", "full", "--attention", "simple"],
        "hardware": "v100_16gb_dgx1_edr.json",
        "ablate_nvswitch": tp > 1 and world <= 8,
        "differences": DLPERF_DIFF.replace("{{--shard none}}", "`--shard none`"),
    }


ZERO_TP = {
    "id": "zero-100b-tp16",
    "source": "arXiv 1910.02054, as zero-100b",
    "published": "15 PetaFLOPS on 400 V100 (37.5 TFLOPS per GPU), as zero-100b",
    "metric": "tflops", "value": 37.5,
    "config": ("zero-100b restated as it ran: Megatron-LM model parallelism of 16 inside each DGX-2 (--tp 16: 64 heads, "
               "4 per rank) under ZeRO-2 data parallelism over the 25 nodes (P_os+g: optimizer states and gradients "
               "partitioned, fp16 parameters whole on every rank: --shard grad_op), 800 sequences of 1024 as 32 per "
               "data-parallel rank in one micro-step (the micro-batch is not stated), activation checkpointing"),
    "model": ["--n-layer", "125", "--n-head", "64", "--d-model", "8192", "--vocab", "50257", "--seq-len", "1024"],
    "run": ["--world", "400", "--tp", "16", "--shard", "grad_op", "--reduce-dtype", "bf16", "-B", "32", "-T", "1024",
            "--recompute", "full", "--attention", "simple"],
    "hardware": "v100_dgx2.json",
    "differences": ("ZeRO-R's partitioned activation checkpointing keeps 1/16 of each layer's checkpoint per rank and "
                    "all-gathers it before the recompute; with sequence parallelism ours keeps the same 1/16 (the "
                    "block input's rows) and recompute's ln1 all-gather stands for it; ZeRO-2 reduces fp16 gradients "
                    "(--reduce-dtype bf16: the same 2 bytes) in buckets on the data-parallel group's own NCCL "
                    "communicator, ours per block on the one comm stream the model-parallel collectives also use "
                    "(src/dist/comm_nccl.cu), so they queue behind each other; Megatron's "
                    "activation all-reduces against our all-gather + reduce-scatter pairs (the same bytes; sequence "
                    "parallelism stays on here because it is what keeps 1/16 of each checkpoint per rank, as ZeRO-R "
                    "did: with it off the 125 full checkpoints alone would need 67 GB per GPU); fp16 against bf16 at "
                    "the same rates; see the tensor-parallel section"),
}

TP_CASES = [
    ZERO_TP,
    *[megatron_case(s) for s in ("1.2b", "2.5b", "4.2b", "8.3b")],
    {**megatron_case("8.3b"), "id": "megatron-8.3b-tp8-dp64",
     "published": "15.1 PetaFLOPS sustained over the application on 512 GPUs (the abstract; 29.5 TFLOPS per GPU, 76% "
                  "of linear against the 39 TFLOPS baseline; Figure 5 reads 74%)",
     "value": 15.1e3 / 512,
     "config": ("8.3B as megatron-8.3b-tp8, 8-way model parallelism inside each DGX-2H (two groups per node of 16) "
                "x 64-way data parallelism over 32 nodes (512 GPUs), global batch 512 (8 per data-parallel rank), "
                "gradients all-reduced across the data-parallel groups"),
     "run": ["--world", "512", "--tp", "8", "--sequence-parallel", "off", "-B", "8", "-T", "1024", "--shard", "none",
             "--reduce-dtype", "bf16",
             "--recompute", "full", "--attention", "simple"]},
    dlperf_case("dlperf-megatron-dp8", "2D_8x1x1_16_1536x16", 33.32, 8, 1,
                note=" (data parallel only: the compute baseline of the cases below)"),
    dlperf_case("dlperf-megatron-dp4-tp2", "2D_4x2x1_16_1536x16", 26.95, 4, 2),
    dlperf_case("dlperf-megatron-dp2-tp4", "2D_2x4x1_16_1536x16", 27.75, 2, 4),
    dlperf_case("dlperf-megatron-tp8", "MP_1x8x1_16_1536x16", 23.11, 1, 8,
                note=" (24.07 in the identical case 2D_1x8x1_16_1536x16)"),
    dlperf_case("dlperf-megatron-tp16-2nodes", "MP_1x16x1_16_3072x16", 2.85, 1, 16, model="3072x16", nodes=2,
                note=": 16-way model parallelism across 2 nodes"),
]


def nvswitch_copy(hw_path, out):
    """The same hardware with its node's GPUs on an NVSwitch at network.intra (the cube mesh's rings dropped)."""
    d = json.load(open(hw_path))
    d["network"]["intra_topology"] = "nvswitch"
    d["network"].pop("intra_rings", None)
    d["name"] += " (ablation: NVSwitch at network.intra instead of the cube mesh's rings)"
    p = Path(out) / ("nvswitch_" + Path(hw_path).name)
    p.write_text(json.dumps(d, indent=2) + "\n")
    return p


def _tp_table(by_id, ids):
    rows = []
    for i in ids:
        r = by_id[i]
        rv = dict(zip(r["case"]["run"][::2], r["case"]["run"][1::2]))
        T, N = int(rv.get("--tp", 1)), int(rv["--world"])
        unit = "TFLOPS/GPU" if r["metric"] == "tflops" else "tokens/s"
        rows.append(f"| {i} | {T} x {N // T} | {r['hardware']} | {r['step_ms']:.0f} | {r['tp_bytes'] / 1e9:.2f} | "
                    f"{r['fsdp_bytes'] / 1e9:.2f} | {r['comm_ms']:.0f} ({r['exposed_comm_ms']:.0f}) | "
                    f"{r['published']:.4g} | {r['predicted']:.4g} {unit} | **{r['ratio']:.2f}** |")
    return ["| case | T x DP | hardware | step ms | TP GB per rank | DP GB per rank | comm ms (exposed) | published | "
            "predicted | predicted / published |", "|---|---|---|---|---|---|---|---|---|---|", *rows]


def tp_section(by_id):
    """The tensor-parallel rows side by side, each against a baseline of its own source."""
    need = ["zero-100b", "zero-100b-tp16", "megatron-1.2b-1gpu", "megatron-2.5b-tp2", "megatron-4.2b-tp4",
            "megatron-8.3b-tp8", "megatron-8.3b-tp8-dp64", "dlperf-megatron-dp8", "dlperf-megatron-dp4-tp2",
            "dlperf-megatron-dp2-tp4", "dlperf-megatron-tp8", "dlperf-megatron-tp16-2nodes"]
    if any(i not in by_id for i in need):
        return ""
    g = lambda i, k: by_id[i][k]
    one = "megatron-1.2b-1gpu"
    base, r1 = g(one, "predicted"), g(one, "ratio")
    meg = ["megatron-2.5b-tp2", "megatron-4.2b-tp4", "megatron-8.3b-tp8", "megatron-8.3b-tp8-dp64"]
    eff = {i: g(i, "predicted") / base for i in meg}
    pub_eff = {i: g(i, "published") / MEGATRON_BASE for i in meg}
    dl = ["dlperf-megatron-dp4-tp2", "dlperf-megatron-dp2-tp4", "dlperf-megatron-tp8", "dlperf-megatron-tp16-2nodes"]
    dp8 = "dlperf-megatron-dp8"
    rel = lambda i, k: g(i, k) / g(dp8, k)
    z, z16, m512, t16 = "zero-100b", "zero-100b-tp16", meg[3], dl[3]
    # a rough split of ZeRO-100B's step: its compute at the efficiency Megatron-LM's 1-GPU baseline shows
    z_exposed = g(z16, "exposed_comm_ms")
    z_slow = (g(z16, "step_ms") - z_exposed) * r1 + z_exposed
    nvs = lambda i: g(i, "nvswitch_tokens_per_s") / 2048
    nvs_off = max(abs(g(i, "nvswitch_tokens_per_s") / g(dp8, "predicted") - rel(i, "published")) for i in dl[:3])
    seqs = lambda i, k="predicted": g(i, k) / 2048
    note = g(t16, "notes")[0] if g(t16, "notes") else "(no note)"
    return "\n".join([
        "## Tensor-parallel runs", "",
        "Restated with `--tp`: the model runs its tensor-parallel collectives through the group's communicator and "
        "the simulated machine prices each on the links the group spans (src/plan/collectives.cpp): the NVSwitch "
        "nodes' intra link whatever the group's size, the DGX-1 cube mesh's ring for a group of 2, 4 or 8 "
        "(data/hardware/v100_16gb_dgx1_edr.json: 20, 80 and 120 GB/s, derived from its links), the network for a "
        "group across nodes. Gradients are reduced in 16 bits (`--reduce-dtype bf16`) as these fp16 runs reduced "
        "them. Per step and rank: TP GB, the tensor-parallel group's bytes; DP GB, the data-parallel engine's (ring "
        "accounting); every collective, of either, runs on the one comm stream (src/dist/comm_nccl.cu).", "",
        *_tp_table(by_id, [z, z16, one, *meg, dp8, *dl]), "",
        f"- **ZeRO-100B as it ran.** Restated as FULL_SHARD over 400 ranks (the row kept above) it is predicted "
        f"{g(z, 'ratio'):.2f}x too fast; restated as it ran, 16-way model parallelism inside each DGX-2 under ZeRO-2 "
        f"over 25 nodes, {g(z16, 'ratio'):.2f}x. What moved: each rank computes 1/16 of every product and sends "
        f"{g(z16, 'tp_bytes') / 1e9:.0f} GB of activations per step over the NVSwitch (32 sequences of 1024 x 8192 "
        f"per data-parallel rank: each all-gather or reduce-scatter moves 0.5 GB, 8 per block and recompute's 3 more), "
        f"and {g(z16, 'fsdp_bytes') / 1e9:.0f} GB of ZeRO-2's gathers and gradient reduce-scatters over the network, "
        "where a data-parallel group has one rank per node and a node's 16 groups share its 100 GB/s. Each "
        "activation collective is waited for by the next product, and on one comm stream it also waits for the "
        f"gradient collectives queued before it: {z_exposed / 1e3:.1f} of {g(z16, 'comm_ms') / 1e3:.1f} s of "
        f"collectives are exposed, and the step goes from {g(z, 'step_ms') / 1e3:.1f} to "
        f"{g(z16, 'step_ms') / 1e3:.1f} s. What remains is the compute side: Megatron-LM's own 1-GPU baseline of the "
        f"same year is predicted {r1:.2f}x too fast (next rows: its kernels reached 30% of the V100's peak, the model "
        f"prices products at up to 78%). A rough split: the step's computing at that baseline's efficiency, with "
        f"its exposed communication as predicted, would take {z_slow / 1e3:.1f} s, a predicted / published ratio of "
        f"{g(z16, 'ratio') * g(z16, 'step_ms') / z_slow:.2f}. Two things this split cannot separate: ZeRO ran its "
        "gradient reductions on the data-parallel group's own communicator, beside Megatron's activation "
        f"all-reduces, where ours queue with them ({g(z16, 'fsdp_bytes') / 1e9:.0f} GB at 5 GB/s per ring, "
        f"{g(z16, 'fsdp_bytes') / 5e9:.1f} s, if none of it were hidden), and how efficiently 2019's kernels ran "
        "products 1/16 as wide as the 1-GPU baseline's own.",
        f"- **Megatron-LM's weak scaling** (Table 1, Figure 5). The 1-GPU baseline is predicted at {base:.0f} "
        f"TFLOPS against 39 published ({r1:.2f}x): the ratio the compute side shares. Divided by it, the "
        "weak-scaling efficiencies compare tensor parallelism alone: predicted "
        + ", ".join(f"{eff[i]:.0%} at T = {i.split('tp')[1].split('-')[0]}" for i in meg[:3])
        + f" and {eff[m512]:.0%} at 8 x 64 (512 GPUs), against Figure 5's "
        + ", ".join(f"{pub_eff[i]:.0%}" for i in meg[:3]) + f" and {pub_eff[m512]:.0%} (the abstract's 15.1 "
        "PetaFLOPS; 74% in Figure 5). Within a DGX-2H the model loses to tensor parallelism what Megatron lost, "
        f"within {max(abs(eff[i] - pub_eff[i]) for i in meg[:3]) * 100:.0f} points. At 512 GPUs it loses far more: "
        f"{g(m512, 'fsdp_bytes') / 1e9:.1f} GB of gradient "
        "all-reduce per rank per step cross the network (8 data-parallel rings of 2 ranks per node share its "
        f"100 GB/s), on the stream the activation collectives need, so {g(m512, 'exposed_comm_ms') / 1e3:.2f} s of "
        f"a {g(m512, 'step_ms') / 1e3:.2f} s step is exposed. Megatron's all-reduce ran on the data-parallel "
        "group's own NCCL communicator (torch.distributed gives each process group its own stream), beside the "
        "activation all-reduces, and Figure 5's 77% -> 74% says it was "
        "almost entirely hidden: this engine, with its one comm stream, would not hide it (a property of the "
        "engine, which the time model reproduces, not an error of the model).",
        f"- **Megatron-LM on the DGX-1 cube mesh** (DLPerf). Against data parallelism on the same 8 GPUs (the "
        f"compute baseline, predicted {g(dp8, 'ratio'):.2f}x too fast), published tensor parallelism keeps "
        + ", ".join(f"{rel(i, 'published'):.0%}" for i in dl[:3]) + " of its throughput at T = 2, 4, 8; predicted "
        + ", ".join(f"{rel(i, 'predicted'):.0%}" for i in dl[:3]) + ". Both order T = 4 above T = 2: on the cube "
        "mesh a pair of GPUs has one NVLink (the pair {0,1}; a step waits for its slowest group) where a quad's "
        f"rings use four. With an NVSwitch at the same 120 GB/s in its place (the same file, topology swapped) the "
        f"prediction would be {nvs(dl[0]):.1f}, {nvs(dl[1]):.1f} and {nvs(dl[2]):.1f} sequences/s, T = 2 the "
        f"fastest, against {seqs(dl[0]):.1f}, {seqs(dl[1]):.1f} and {seqs(dl[2]):.1f} on the cube mesh. The "
        f"predicted shares are within {max(abs(rel(i, 'predicted') - rel(i, 'published')) for i in dl[:3]) * 100:.0f} "
        "points of the published ones, with ring bandwidths derived from the links rather than measured (the "
        f"file's sources): the same comparison on an NVSwitch would be off by {nvs_off * 100:.0f} points.",
        f"- **Tensor parallelism across nodes.** 16-way over two DGX-1 nodes (a wider model, 3072 x 16): the report "
        f"warns ('{note}') and prices every activation collective on the node's one 100 Gb/s HCA (10 GB/s at the "
        f"files' 0.8): {g(t16, 'tp_bytes') / 1e9:.1f} GB per rank per step, {g(t16, 'comm_ms') / 1e3:.2f} s of a "
        f"{g(t16, 'step_ms') / 1e3:.2f} s step. Predicted {seqs(t16):.2f} sequences/s against "
        f"{seqs(t16, 'published'):.2f} published ({g(t16, 'ratio'):.2f}x; the other DLPerf rows "
        f"{min(g(i, 'ratio') for i in [dp8, *dl[:3]]):.2f}-{max(g(i, 'ratio') for i in [dp8, *dl[:3]]):.2f}x): the "
        "network sets this run's time, and the model prices it there.", ""])
