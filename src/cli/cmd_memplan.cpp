// `gpt memplan`: the memory of a training run per rank, per domain and per ledger category, predicted
// before launching it (src/plan/memplan.h), as a table or JSON. With --budget it names the largest model
// of the depth family (and which presets) fit a per-rank device budget; with --zero-table it prints
// ZeRO's Table 1 (arXiv 1910.02054) for 7.5B parameters beside our own accounting.
#include <algorithm>
#include <cstdio>
#include <string>

#include "src/cli/attention_plan.h"
#include "src/cli/flags.h"
#include "src/cli/plan_auto.h"
#include "src/cli/sharding_flags.h"
#include "src/cli/time_report.h"
#include "src/cli/train_flags.h"
#include "src/core/check.h"
#include "src/dist/communicator.h"
#include "src/fsdp/offload_set.h"
#include "src/io/atomic_file.h"
#include "src/plan/hardware.h"
#include "src/plan/memplan.h"
#include "src/plan/timemodel.h"
#include "src/runtime/runtime.h"

namespace gpt {
namespace {

const char* kMemplanHelp =
    "usage: gpt memplan [--config d12 ...] [--world N] [sharding/recompute/offload flags] [-B N -T N]\n"
    "                   [--device cpu|cuda] [--json] [--budget 24GiB | --zero-table]\n"
    "Predicts one rank's memory ledger for a training step without running it: bytes per category\n"
    "(param_shard grad_shard optim_state gathered_param gathered_grad activation workspace host_offload)\n"
    "on the device and the host, and the peak totals. Every rank holds the same (shards are padded).\n"
    "  --world N            ranks of the run (default: this launch's world size)\n"
    "  --shard full|grad_op|none|hybrid  --shard-group G  --no-sync   (over the --world/--tp data-parallel ranks)\n"
    "  --tp T (1)  --sequence-parallel on|off (on when T > 1)   tensor parallelism (gpt train --help)\n"
    "  --gather-slots K (2)  gather slots for the non-root units: the unit in use + K-1 gathered ahead of it\n"
    "                       (K = 1: no prefetch); each costs the largest non-root unit, padded, in the compute dtype\n"
    "                       (grad_op: one slot per unit, K only sets how far ahead forward gathers)\n"
    "  --recompute none|full|every:K|selective   --reduce-dtype fp32|bf16\n"
    "  --offload none|optimizer|params|activations, or a list (params,activations)\n"
    "  --wrap block|blocks:K|min-params:N  blocks per sharding unit (gpt train --help says what each costs)\n"
    "  -B N (4)  -T N (64)  per-rank micro-batch and sequence length\n"
    "  --train GLOB --val GLOB  the run's shards: the vocabulary follows their tokenizer record (as in gpt train)\n"
    "  --device cpu|cuda|auto   cpu = fp32 compute, cuda = bf16 compute (default cpu)\n"
    "  --attention simple|fused|cudnn, default auto (as gpt train resolves it: against this machine's GPU, or\n"
    "                       without one an sm_90 GPU with this build's cuDNN). fused and cudnn keep a (B,NH,T)\n"
    "                       log-sum-exp instead of (B,NH,T,T) probabilities. cudnn's plan workspace is measured\n"
    "                       by building the plans on the GPU; without one it is counted as 0 (\"exact\": false)\n"
    "  --budget SIZE        per-rank device budget (24GiB, 80GB, 1e9): the largest model of the depth\n"
    "                       family dL (L layers, L heads, C = 64L; vocab and seq-len from the flags) that fits\n"
    "  --zero-table         ZeRO's Table 1 for Psi = 7.5e9 at N = 4, 16, 64, 1024, with our accounting\n"
    "  --json               one JSON object instead of the table\n"
    "time (src/plan/timemodel.h): the step run on a simulated machine priced by a hardware file's rates and links\n"
    "  --time --hardware FILE   predicted step time, exposed communication, tokens/s and MFU (data/hardware/*.json,\n"
    "                       or this machine's: gpt bench --calibrate --out FILE). --hardware this: with --device\n"
    "                       cuda the GPU's datasheet by its name, on the cpu this launch's cached calibration\n"
    "  --trace FILE         (with --time) the simulated step as a Perfetto trace in simulated time: the tracks of\n"
    "                       gpt train --trace (compute per unit, gather and reduce slots, copies, counters) and\n"
    "                       the simulated comm and copy streams\n"
    "  --total-batch TOK    global batch in tokens (default B*T*world): micro-steps = TOK / (B*T*world)\n"
    "  --ranks-per-node R   (default min(world, the file's devices_per_node))  --threads-per-rank T (cpu)\n"
    "  --sweep              a table over --sweep-world (1,2,4,8,16,32,64,128) x --sweep-shard (full,grad_op,none,hybrid)\n"
    "                       --sweep-scaling weak|strong (weak: -B per rank fixed; strong: B*world fixed)\n";

std::string join_json(const MemBreakdown& b) {
  std::string s = "{";
  for (int c = 0; c < kMemCats; c++)
    s += str(c ? ", " : "", "\"", memcat_name((MemCat)c), "\": ", b[c]);
  return s + "}";
}

// "tp 2 (sequence parallel) x dp 4 | " with tensor parallelism, else "".
std::string describe_tp(const TpOptions& tp, int world) {
  if (tp.size == 1) return "";
  return str("tp ", tp.size, tp.sequence_parallel ? " (sequence parallel)" : "", " x dp ", world / tp.size, " | ");
}

std::string describe_input(const MemPlanInput& in, const MemPlan& p) {
  return str("ranks ", in.world, " | ", describe_tp(in.tp, in.world), "shard ", FsdpOptions::name(in.fsdp.strategy), " (group ", p.group,
             ") | gather slots ", in.fsdp.gather_slots, in.fsdp.no_sync ? " | no-sync" : "", " | offload ",
             OffloadSet{in.fsdp.offload, in.offload_activations}.str(), " | recompute ", in.recompute.str(),
             in.wrap != WrapPolicy{} ? " | wrap " + in.wrap.str() : std::string(), " | B=", in.B, " T=", in.T,
             " | compute ", dtype_name(in.compute), in.compute == DType::F32 ? " (cpu)" : " (cuda)",
             in.compute == DType::BF16 ? str(" | attention ", attention_path_name(in.attention)) : std::string());
}

std::string plan_table(const std::string& name, const MemPlanInput& in, const MemPlan& p) {
  std::string out = str("model ", name, ": ", in.cfg.describe(), "\n", describe_input(in, p), "\n");
  out += "per rank, peak over one training step (every rank holds the same bytes):\n";
  char line[160];
  std::snprintf(line, sizeof line, "  %-15s %18s %12s   %18s %12s\n", "category", "device bytes", "", "host bytes", "");
  out += line;
  for (int c = 0; c < kMemCats; c++) {
    const int64_t d = p.at(MemDomain::device, (MemCat)c), h = p.at(MemDomain::host, (MemCat)c);
    std::snprintf(line, sizeof line, "  %-15s %18lld %12s   %18lld %12s\n", memcat_name((MemCat)c), (long long)d,
                  format_bytes(d).c_str(), (long long)h, format_bytes(h).c_str());
    out += line;
  }
  std::snprintf(line, sizeof line, "  %-15s %18lld %12s   %18lld %12s\n", "peak total", (long long)p.device_peak,
                format_bytes(p.device_peak).c_str(), (long long)p.host_peak, format_bytes(p.host_peak).c_str());
  out += line;
  out += str("model states: 16 bytes x ", p.shard_elems, " owned params = ", format_bytes(p.model_state_bytes()),
             " (fp32 param + grad + Adam m + v; 16*Psi/G = ", format_bytes((int64_t)(16.0 * p.psi / p.group)), ")\n");
  if (p.rotating_slots > 0)
    out += str("gather slots: root (embed, ", p.root_padded, " elems) + ", p.rotating_slots, " x largest unit (",
               p.max_padded, " elems) in ", dtype_name(in.compute), "\n");
  if (!p.exact)
    out += "not exact: the cuDNN attention plans' workspace is known only by building them on a GPU (none visible "
           "here); it is counted as 0, so workspace and the peaks are lower bounds\n";
  return out;
}

std::string plan_json(const std::string& name, const MemPlanInput& in, const MemPlan& p) {
  const GPTConfig& c = in.cfg;
  return str("{\"config\": \"", name, "\", \"L\": ", c.num_layers, ", \"NH\": ", c.num_heads, ", \"C\": ", c.channels,
             ", \"maxT\": ", c.max_seq_len, ", \"V\": ", c.vocab_size, ", \"Vp\": ", c.padded_vocab_size,
             ", \"psi\": ", p.psi, ", \"world\": ", in.world, ", \"tp\": ", in.tp.size,
             ", \"sequence_parallel\": ", in.tp.sequence_parallel ? "true" : "false", ", \"shard\": \"",
             FsdpOptions::name(in.fsdp.strategy),
             "\", \"group\": ", p.group, ", \"gather_slots\": ", in.fsdp.gather_slots,
             ", \"no_sync\": ", in.fsdp.no_sync ? "true" : "false", ", \"offload\": \"",
             OffloadSet{in.fsdp.offload, in.offload_activations}.str(), "\", \"recompute\": \"", in.recompute.str(), "\", \"wrap\": \"", in.wrap.str(), "\", \"B\": ", in.B,
             ", \"T\": ", in.T, ", \"dtype\": \"", dtype_name(in.compute), "\", \"model_state_bytes\": ",
             p.model_state_bytes(), ", \"device_bytes\": ", join_json(p.peak[(int)MemDomain::device]),
             ", \"host_bytes\": ", join_json(p.peak[(int)MemDomain::host]), ", \"device_peak_bytes\": ", p.device_peak,
             ", \"host_peak_bytes\": ", p.host_peak, ", \"attention\": \"", attention_path_name(in.attention),
             "\", \"exact\": ", p.exact ? "true" : "false", "}\n");
}

std::string budget_report(int64_t budget, const MemPlanInput& shape, bool json) {
  const ModelFit fit = largest_model_that_fits(budget, shape);
  std::string presets_json, presets_text;
  for (const char* name : {"d2", "d4", "d6", "d12", "d24", "d36", "d48"}) {
    MemPlanInput in = shape;
    GPTConfig c = preset_config(name);
    c.vocab_size = shape.cfg.vocab_size;
    c.max_seq_len = shape.cfg.max_seq_len;
    c.finalize();
    in.cfg = c;
    const bool ok = in.recompute.mode != RecomputePolicy::Mode::every || in.recompute.every_k <= c.num_layers;
    const int64_t need = ok ? plan_memory(in).device_peak : -1;
    const bool fits = ok && need <= budget;
    presets_json += str(presets_json.empty() ? "" : ", ", "{\"config\": \"", name, "\", \"device_peak_bytes\": ",
                        need, ", \"fits\": ", fits ? "true" : "false", "}");
    presets_text += str("  ", name, ": ", ok ? format_bytes(need) : std::string("n/a (every:K > layers)"),
                        fits ? "  fits\n" : "  does not fit\n");
  }
  const std::string name = str("d", fit.depth);
  MemPlanInput fit_in = shape;
  fit_in.cfg = fit.cfg;
  if (json) {
    std::string largest = plan_json(name, fit_in, fit.plan);
    largest.pop_back();  // its newline
    return str("{\"budget_bytes\": ", budget, ", \"largest\": ", largest, ", \"presets\": [", presets_json, "]}\n");
  }
  std::string out = str("budget ", format_bytes(budget), " (", budget, " bytes) of device memory per rank\n");
  out += str("largest model of the depth family dL (L layers, L heads, C = 64L) that fits: ", name, " (L=", fit.depth,
             " NH=", fit.depth, " C=", fit.cfg.channels, ", ", fit.plan.psi, " params), device peak ",
             format_bytes(fit.plan.device_peak), ", host peak ", format_bytes(fit.plan.host_peak), "\n");
  if (fit.depth < kMaxFamilyDepth) {
    MemPlanInput next = shape;
    next.cfg = depth_family_config(fit.depth + 1, shape.cfg);
    try {
      out += str("  (d", fit.depth + 1, " would need ", format_bytes(plan_memory(next).device_peak), ")\n");
    } catch (const Error&) {
      out += str("  (d", fit.depth + 1, " is past 2^63 bytes)\n");
    }
  }
  out += str("presets with ", describe_input(shape, fit.plan), ":\n", presets_text);
  return out;
}

std::string zero_report(bool json) {
  const double psi = 7.5e9, K = 12;
  GPTConfig base;  // GPT-2 vocabulary and sequence length
  base.finalize();
  const int depth = closest_family_depth(psi, base);
  MemPlanInput in;
  in.cfg = depth_family_config(depth, base);
  in.B = in.T = 1;
  in.compute = DType::BF16;
  std::string rows, out;
  char line[200];
  out = str("ZeRO Table 1 (arXiv 1910.02054): model-state memory per rank for Psi = 7.5e9, (2+2+K)*Psi with K = ",
            K, "; GB = 1e9 bytes\n");
  out += str("ours: fp32 Adam on CPU = 16*Psi/N (param 4 + grad 4 + m 4 + v 4); mixed precision on GPU per our engine ",
             "= 16 bytes per owned param + bf16 gather slots (root + 2 x largest unit), for d", depth, " (Psi = ",
             in.cfg.num_params(), "), --shard full\n");
  std::snprintf(line, sizeof line, "%6s %9s %9s %9s %9s | %13s | %11s %9s %9s\n", "N", "baseline", "P_os",
                "P_os+g", "P_os+g+p", "ours CPU f32", "ours GPU st", "+ slots", "= total");
  out += line;
  for (int N : {4, 16, 64, 1024}) {
    const ZeroRow z = zero_table(psi, N, K);
    in.world = N;
    const MemPlan p = plan_memory(in);
    const double states = (double)p.model_state_bytes(), slots = (double)p.at(MemDomain::device, MemCat::gathered_param);
    const double cpu = 16 * psi / N;
    std::snprintf(line, sizeof line, "%6d %9.2f %9.2f %9.2f %9.2f | %13.2f | %11.2f %9.2f %9.2f\n", N,
                  z.baseline / 1e9, z.stage1 / 1e9, z.stage2 / 1e9, z.stage3 / 1e9, cpu / 1e9, states / 1e9,
                  slots / 1e9, (states + slots) / 1e9);
    out += line;
    rows += str(rows.empty() ? "" : ", ", "{\"N\": ", N, ", \"baseline\": ", z.baseline, ", \"stage1\": ", z.stage1,
                ", \"stage2\": ", z.stage2, ", \"stage3\": ", z.stage3, ", \"ours_cpu_f32\": ", cpu,
                ", \"ours_gpu_states\": ", states, ", \"ours_gpu_gather_slots\": ", slots, "}");
  }
  if (json)
    return str("{\"psi\": ", psi, ", \"K\": ", K, ", \"ours_model\": \"d", depth, "\", \"ours_psi\": ",
               in.cfg.num_params(), ", \"rows\": [", rows, "]}\n");
  return out;
}

}  // namespace

// Flags that only one report reads: given without it they would change nothing, so they are an error.
void check_report_flags(const Flags& f, bool time, bool sweep) {
  for (const char* flag : {"--hardware", "--ranks-per-node", "--threads-per-rank"})
    GPT_CHECK(time || sweep || !f.has(flag), "gpt memplan: ", flag, " is read only with --time or --sweep");
  for (const char* flag : {"--sweep-world", "--sweep-shard", "--sweep-scaling"})
    GPT_CHECK(sweep || !f.has(flag), "gpt memplan: ", flag, " is read only with --sweep");
}

int cmd_memplan(int argc, char** argv, Communicator& world) {
  Flags f("memplan", argc, argv, {"--no-sync", "--json", "--zero-table", "--time", "--sweep"});
  if (f.help()) {
    if (world.rank() == 0) std::printf("%s%s", kMemplanHelp, kModelFlagsHelp);
    return 0;
  }
  std::string name;
  MemPlanInput in;
  in.cfg = parse_model_flags(f, &name, "d12");
  for (const char* flag : {"--train", "--val"})  // read only for their tokenizer record, but they must name shards
    if (f.has(flag)) glob_files(f.str(flag, ""), flag);
  in.world = f.i32("--world", world.world(), 1, 1 << 20);
  parse_sharding_flags(f, in);
  GPT_CHECK(in.fsdp.engine == EngineKind::full, "gpt memplan: --engine naive is not planned (the plans are the full ",
            "engine's; the naive one never holds more)");
  in.B = f.i32("-B", 4, 1, 1 << 20);
  in.T = f.i32("-T", 64, 1, 1 << 20);
  const DeviceKind device = resolve_device(f.str("--device", "cpu"));
  in.compute = device == DeviceKind::cuda ? DType::BF16 : DType::F32;
  const std::string attention = f.str("--attention", "auto");
  check_attention_flag(attention);
  const bool json = f.on("--json"), zero = f.on("--zero-table");
  const std::string budget = f.str("--budget", "");
  // --time: the time model
  const bool time = f.on("--time"), sweep = f.on("--sweep");
  const std::string hw_path = f.str("--hardware", "");
  TimeModelInput tin;
  tin.trace_path = f.str("--trace", "");
  // the data-parallel ranks' rows (at least one: a world smaller than --tp is refused by the plan's checks)
  const int64_t tokens = (int64_t)in.B * in.T * std::max(1, in.world / std::max(1, in.tp.size));
  const int64_t total = f.i64("--total-batch", tokens, 1, (int64_t)1 << 50);
  tin.ranks_per_node = f.i32("--ranks-per-node", 0, 0, 1 << 20);
  tin.threads_per_rank = f.i32("--threads-per-rank", 0, 0, 1 << 20);
  SweepSpec sw;
  sw.worlds = parse_int_list(f.str("--sweep-world", "1,2,4,8,16,32,64,128"), "--sweep-world");
  sw.strategies = parse_strategy_list(f.str("--sweep-shard", "full,grad_op,none,hybrid"), "--sweep-shard");
  const std::string scaling = f.str("--sweep-scaling", "weak");
  GPT_CHECK(scaling == "weak" || scaling == "strong", "--sweep-scaling: expected weak or strong, got '", scaling, "'");
  sw.weak = scaling == "weak";
  f.finish();
  check_report_flags(f, time, sweep);
  GPT_CHECK(!(zero && !budget.empty()), "gpt memplan: --budget and --zero-table are separate reports, give one");
  resolve_planned_attention(in, attention, device, budget.empty() && !zero);
  GPT_CHECK(!(time || sweep) || !hw_path.empty(), "gpt memplan --time/--sweep: give --hardware FILE (data/hardware/*.json, ",
            "or this machine's from gpt bench --calibrate --out FILE)");
  GPT_CHECK(!((time || sweep) && (zero || !budget.empty())), "gpt memplan: --time and --sweep do not combine with --budget or --zero-table");
  GPT_CHECK(tin.trace_path.empty() || (time && !sweep), "gpt memplan --trace FILE: needs --time (and no --sweep)");
  if (!tin.trace_path.empty()) check_writable("--trace", tin.trace_path);
  GPT_CHECK(total % tokens == 0, "--total-batch ", total, " must be a multiple of B*T*world = ", tokens);
  tin.run = in;
  tin.grad_accum = (int)(total / tokens);
  const std::string hw_file = hardware_flag_file(hw_path, world, device, in.world, tin.threads_per_rank);
  std::string out;
  if (sweep) {
    out = sweep_report(tin, load_hardware(hw_file), sw, json);
  } else if (time) {
    const HardwareSpec hw = load_hardware(hw_file);
    const MemPlan mp = plan_memory(in);
    const TimePlan tp = plan_time(tin, hw);
    if (json) {
      out = plan_json(name, in, mp);
      out.resize(out.size() - 2);  // "}\n"
      out += str(", \"time\": {", time_json_members(tin, tp, hw), "}}\n");
    } else {
      out = plan_table(name, in, mp) + time_table(tin, tp, hw);
    }
  } else if (zero)
    out = zero_report(json);
  else if (!budget.empty())
    out = budget_report(parse_byte_size(budget, "--budget"), in, json);
  else
    out = json ? plan_json(name, in, plan_memory(in)) : plan_table(name, in, plan_memory(in));
  if (world.rank() == 0) {
    std::fputs(out.c_str(), stdout);
    std::fflush(stdout);
  }
  return 0;
}

}  // namespace gpt
