// `gpt plan`: the fastest configurations of a model on N ranks of a machine that fit a memory budget,
// predicted in seconds before anything is launched (src/plan/plan_search.h searches, plan_report.h prints).
#include <cstdio>
#include <string>

#include "src/cli/attention_plan.h"
#include "src/cli/commands.h"
#include "src/cli/plan_auto.h"
#include "src/cli/plan_flags.h"
#include "src/cli/plan_report.h"
#include "src/cli/train_flags.h"
#include "src/core/check.h"

namespace gpt {
namespace {

const char* kPlanHelp =
    "usage: gpt plan [model flags] --world N --hardware FILE --total-batch TOKENS [-T N] [--budget DEVICE[,HOST]]\n"
    "                [--top K] [--json] [--sample N --seed S] [any of the flags below, to fix them]\n"
    "The fastest configurations that fit, predicted without running anything: every candidate's memory is the\n"
    "memory plan (gpt memplan: the engine's geometry and activation plan, equal to the ledger byte for byte) and\n"
    "its time one step of the real model and engine on a simulated machine priced by FILE (gpt memplan --time).\n"
    "  --world N            ranks (default: this launch's)     --hardware FILE  data/hardware/*.json, or this\n"
    "                       machine's (gpt bench --calibrate --out FILE); a gpu file plans bf16 compute. `this`:\n"
    "                       the visible GPU's datasheet, else this launch's cached cpu calibration (made if missing)\n"
    "  --total-batch TOK    tokens per optimizer step over all ranks: a multiple of T x N/tp for a --tp searched\n"
    "  -T N                 sequence length (default the model's --seq-len)\n"
    "  --budget D[,H]       per-rank device and host memory (24GiB, 80GB, 1e9). Default: a gpu file's device\n"
    "                       memory and no host limit; on a cpu file this machine's available memory shared by\n"
    "                       the ranks (one size: device and host are the same RAM). The pre-flight margin\n"
    "                       (5% + 256 MiB) is added to every need, so what the plan picks passes pre-flight\n"
    "  --top K (5)          how many to print   --json  one JSON object\n"
    "  --per-tp             price each other tensor-parallel size until its fastest is exact (slower: under TP\n"
    "                       the bounds are loose); without it the report names, per other size, its fastest\n"
    "                       candidate priced, or the bound none of them beats, and why it is not #1\n"
    "  --sample N --seed S  also price N others drawn at random from the feasible space (for measuring)\n"
    "  --ranks-per-node R   --threads-per-rank T (cpu)   as gpt memplan --time\n"
    "  --attention simple|fused|cudnn (gpu files; default auto, as gpt memplan)\n"
    "searched, unless fixed by giving the flag (gpt train --help says what each does):\n"
    "  --tp T for every T dividing the heads, the padded vocabulary and N that fits in a node (the file's\n"
    "                       devices_per_node, or --ranks-per-node); -B and the shard flags are then per data-parallel\n"
    "                       rank (N/T of them): N/T x B x accumulation = the global batch in sequences\n"
    "  --sequence-parallel on|off (T > 1, where T divides the B*T rows)\n"
    "  --shard full|grad_op|none|hybrid, with --shard-group G for every G dividing N/T (1 < G < N/T)\n"
    "  --recompute none|selective|every:4|every:2|full     --offload none|optimizer|params, each with and\n"
    "                       without activations (gpu files only: on a cpu, device and host are one RAM)\n"
    "  --wrap blocks:K (K = ceil(L/u), u = 1..L; every K with --tp > 1)   --gather-slots 1|2|3\n"
    "  -B every divisor of the sequences a data-parallel rank takes per step (accumulation makes up the rest)\n"
    "  --reduce-dtype fp32|bf16\n"
    "  --no-sync (with accumulation)\n"
    "pruning (exact under the time model, never sampling): (0) one data-parallel rank with the states on the\n"
    "device runs one program whatever the strategy and gather slots (and wrap, without --tp): one of each is\n"
    "kept; (1) the wraps above: another K has as many units and larger slots than blocks:ceil(L/ceil(L/K));\n"
    "(2) what does not fit the budget; (3) dominance: of two fitting candidates that differ only in recompute,\n"
    "offload and gather slots (with --tp > 1: recompute and activation offload), the one that recomputes more,\n"
    "offloads a superset or has fewer slots is dropped; (4) branch and bound: each (T, SP, recompute, B)'s compute time (and on a gpu file its\n"
    "tensor-parallel collectives), from one simulated micro-step, bounds the step of every candidate sharing it;\n"
    "candidates are priced in bound order until the bound reaches the K-th best step, so the top K are exact;\n"
    "(5) the channel: one stream carries every collective, so a step lasts at least the tensor-parallel ones\n"
    "plus the larger of the compute and the engine's, whose least (the coarsest wrap's, one simulated step per\n"
    "engine) is scaled to the accumulation. The report says how large the space was and what each rule cut.\n";

}  // namespace

int cmd_plan(int argc, char** argv, Communicator& world) {
  Flags f("plan", argc, argv, {"--json", "--no-sync", "--per-tp"});
  if (f.help()) {
    if (world.rank() == 0) std::printf("%s%s", kPlanHelp, kModelFlagsHelp);
    return 0;
  }
  std::string name;
  PlanRequest rq;
  rq.base.cfg = parse_model_flags(f, &name, "d12");
  rq.base.world = f.i32("--world", world.world(), 1, 1 << 20);
  rq.base.T = f.i32("-T", rq.base.cfg.max_seq_len, 1, 1 << 20);
  const std::string hw_path = f.required("--hardware");
  rq.total_batch = f.i64("--total-batch", 0, 1, (int64_t)1 << 50);
  GPT_CHECK(f.has("--total-batch"), "gpt plan: give --total-batch TOKENS (the global batch the plan must reach)");
  const std::string budget = f.str("--budget", "");
  rq.top = f.i32("--top", 5, 1, 1000);
  rq.sample = f.i32("--sample", 0, 0, 1000);
  rq.seed = (uint64_t)f.i64("--seed", 1, 0, INT64_MAX);
  rq.ranks_per_node = f.i32("--ranks-per-node", 0, 0, 1 << 20);
  rq.threads_per_rank = f.i32("--threads-per-rank", 0, 0, 1 << 20);
  const std::string attention = f.str("--attention", "auto");
  rq.pins = parse_plan_pins(f);
  const bool json = f.on("--json");
  rq.best_per_tp = f.on("--per-tp");
  f.finish();
  // `this` machine: its GPU's datasheet where one is visible, else its cpu calibration (a file asks no device)
  const DeviceKind here = hw_path == "this" ? resolve_device("auto") : DeviceKind::cpu;
  const HardwareSpec hw = load_hardware(hardware_flag_file(hw_path, world, here, rq.base.world, rq.threads_per_rank));
  rq.hw = &hw;
  const bool gpu = hw.kind == "gpu";
  rq.base.compute = gpu ? DType::BF16 : DType::F32;
  resolve_planned_attention(rq.base, attention, gpu ? DeviceKind::cuda : DeviceKind::cpu, false);
  const int per_node = rq.ranks_per_node ? rq.ranks_per_node : std::min(rq.base.world, hw.devices_per_node);
  rq.budget = parse_plan_budget(budget, hw, per_node);
  const PlanResult r = search_plans(rq);
  const std::string out = json ? plan_json(rq, r, name) : plan_text(rq, r, name);
  if (world.rank() == 0) {
    std::fputs(out.c_str(), stdout);
    std::fflush(stdout);
  }
  return 0;
}

}  // namespace gpt
