// See time_report.h.
#include "src/cli/time_report.h"

#include <cstdio>
#include <cstdlib>

#include "src/core/check.h"
#include "src/fsdp/geometry.h"
#include "src/io/json_min.h"
#include "src/plan/memplan.h"

namespace gpt {

namespace {

double ms(double s) { return s * 1e3; }

std::string fmt(const char* f, double x) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, x);
  return buf;
}

}  // namespace

std::string time_table(const TimeModelInput& in, const TimePlan& p, const HardwareSpec& hw) {
  const StepPhases& ph = p.phases;
  std::string out = str("predicted step time on ", hw.name, " (", hw.file, ")\n");
  out += str("  priced with: ", p.profile, "; network: ", p.network, "\n");
  out += str("  step          ", fmt("%10.3f", ms(p.step_s)), " ms   (", in.grad_accum, " micro-step",
             in.grad_accum > 1 ? "s" : "", ")\n");
  auto line = [&](const char* what, double s) {
    out += str("    ", what, fmt("%10.3f", ms(s)), " ms  ", fmt("%5.1f", 100 * s / p.step_s), "%\n");
  };
  line("forward     ", ph.forward);
  if (ph.recompute > 0) line("recompute   ", ph.recompute);
  line("backward    ", ph.backward);
  line("engine      ", ph.engine);
  if (ph.copies > 0) line("copies      ", ph.copies);
  line("exposed comm", ph.exposed_comm);
  line("optimizer   ", ph.optimizer);
  if (ph.host_wait > 0) line("host wait   ", ph.host_wait);
  out += str("  communication ", fmt("%10.3f", ms(p.comm_s)), " ms in collectives, ", fmt("%.3f", ms(p.exposed_comm_s)),
             " ms exposed", p.comm_s > 0 ? str(" (", fmt("%.0f", 100 * (1 - p.exposed_comm_s / p.comm_s)), "% hidden)") : "",
             "\n");
  out += "  bytes sent per rank per step (ring accounting, as the communication ledger counts):";
  const bool tp = in.run.tp.size > 1;
  if (tp) out += " fsdp";
  bool any = false;
  for (int k = 0; k < kCollKinds; k++)
    if (p.calls[k] > 0) {
      out += str(" ", collkind_name((CollKind)k), " ", p.bytes[k], " (", p.calls[k], " calls)");
      any = true;
    }
  if (tp && !any) out += " none";
  if (tp) {
    out += "; tp";
    for (int k = 0; k < kCollKinds; k++)
      if (p.tp_calls[k] > 0) out += str(" ", collkind_name((CollKind)k), " ", p.tp_bytes[k], " (", p.tp_calls[k], " calls)");
  }
  if (p.comm_s == 0) out += " none";
  out += "\n";
  out += str("  tokens/s      ", fmt("%10.1f", p.tokens_per_s), " (all ranks)   MFU ", fmt("%.1f", 100 * p.mfu),
             "% of ", fmt("%.4g", p.peak_flops / 1e12), " TFLOP/s per rank (6n + 12LCT per token)\n");
  for (const std::string& n : p.notes) out += str("  note: ", n, "\n");
  out += str("  planned by running the step on a simulated machine in ", fmt("%.1f", ms(p.plan_s)), " ms\n");
  if (!p.trace_path.empty()) out += str("  trace of the simulated step: ", p.trace_path, "\n");
  return out;
}

std::string time_json_members(const TimeModelInput& in, const TimePlan& p, const HardwareSpec& hw) {
  const StepPhases& ph = p.phases;
  std::string bytes, calls, tp_bytes, tp_calls;
  for (int k = 0; k < kCollKinds; k++) {
    bytes += str(k ? ", " : "", "\"", collkind_name((CollKind)k), "\": ", p.bytes[k]);
    calls += str(k ? ", " : "", "\"", collkind_name((CollKind)k), "\": ", p.calls[k]);
    tp_bytes += str(k ? ", " : "", "\"", collkind_name((CollKind)k), "\": ", p.tp_bytes[k]);
    tp_calls += str(k ? ", " : "", "\"", collkind_name((CollKind)k), "\": ", p.tp_calls[k]);
  }
  std::string units;
  for (size_t u = 0; u < p.units.size(); u++) {
    const UnitTime& ut = p.units[u];
    units += str(u ? ", " : "", "{\"unit\": ", json_quote(ut.name), ", \"forward_ms\": ", ms(ut.forward),
                 ", \"recompute_ms\": ", ms(ut.recompute), ", \"backward_ms\": ", ms(ut.backward), "}");
  }
  std::string notes;
  for (size_t i = 0; i < p.notes.size(); i++) notes += str(i ? ", " : "", json_quote(p.notes[i]));
  return str("\"hardware\": ", json_quote(hw.name), ", \"hardware_file\": ", json_quote(hw.file), ", \"grad_accum\": ",
             in.grad_accum, ", \"step_ms\": ", ms(p.step_s), ", \"tokens_per_s\": ", p.tokens_per_s, ", \"mfu\": ", p.mfu,
             ", \"peak_flops\": ", p.peak_flops, ", \"compute_ms\": ", ms(p.compute_s), ", \"comm_ms\": ", ms(p.comm_s),
             ", \"exposed_comm_ms\": ", ms(p.exposed_comm_s), ", \"phases_ms\": {\"forward\": ", ms(ph.forward),
             ", \"recompute\": ", ms(ph.recompute), ", \"backward\": ", ms(ph.backward), ", \"engine\": ", ms(ph.engine),
             ", \"copies\": ", ms(ph.copies), ", \"exposed_comm\": ", ms(ph.exposed_comm), ", \"optimizer\": ",
             ms(ph.optimizer), ", \"host_wait\": ", ms(ph.host_wait), "}, \"hardware_flops_per_step\": ", p.hardware_flops,
             ", \"model_flops_per_token\": ", p.model_flops_per_token, ", \"bytes\": {", bytes, "}, \"calls\": {", calls,
             "}, \"tp_bytes\": {", tp_bytes, "}, \"tp_calls\": {", tp_calls,
             "}, \"profile\": ", json_quote(p.profile), ", \"network\": ", json_quote(p.network), ", \"units\": [", units,
             "], \"plan_ms\": ", ms(p.plan_s), ", \"notes\": [", notes, "]");
}

std::vector<int> parse_int_list(const std::string& s, const std::string& flag) {
  std::vector<int> out;
  size_t i = 0;
  while (i <= s.size()) {
    const size_t j = s.find(',', i);
    const std::string item = s.substr(i, j == std::string::npos ? std::string::npos : j - i);
    char* end = nullptr;
    const long v = std::strtol(item.c_str(), &end, 10);
    GPT_CHECK(!item.empty() && end && *end == '\0' && v >= 1 && v <= (1 << 20), flag,
              ": expected a comma-separated list of integers in [1, 2^20] like 1,2,4,8, got '", s, "'");
    out.push_back((int)v);
    if (j == std::string::npos) break;
    i = j + 1;
  }
  return out;
}

std::vector<ShardStrategy> parse_strategy_list(const std::string& s, const std::string& flag) {
  std::vector<ShardStrategy> out;
  size_t i = 0;
  while (true) {
    const size_t j = s.find(',', i);
    const std::string item = s.substr(i, j == std::string::npos ? std::string::npos : j - i);
    GPT_CHECK(item == "full" || item == "grad_op" || item == "none" || item == "hybrid", flag,
              ": expected a comma-separated list of full, grad_op, none, hybrid, got '", s, "'");
    out.push_back(FsdpOptions::parse_strategy(item));
    if (j == std::string::npos) break;
    i = j + 1;
  }
  return out;
}

std::string sweep_report(const TimeModelInput& base, const HardwareSpec& hw, const SweepSpec& sweep, bool json) {
  const int64_t global_seqs = (int64_t)base.run.B * base.run.world;
  std::string out;
  char line[256];
  if (!json) {
    out += str("predicted scaling on ", hw.name, " (", hw.file, "), ", sweep.weak ? "weak" : "strong",
               " scaling: ", sweep.weak ? str("-B ", base.run.B, " per rank") : str(global_seqs, " sequences per micro-step"),
               ", T=", base.run.T, ", ", base.grad_accum, " micro-step(s)\n");
    std::snprintf(line, sizeof line, "%6s %-8s %5s %4s %11s %13s %11s %7s %11s %11s %s\n", "N", "shard", "G", "B",
                  "step ms", "tokens/s", "tok/s/rank", "MFU", "exposed ms", "peak MiB", "fits");
    out += line;
  }
  for (int N : sweep.worlds) {
    for (ShardStrategy st : sweep.strategies) {
      TimeModelInput in = base;
      in.run.world = N;
      in.run.fsdp.strategy = st;
      in.run.fsdp.shard_group = 0;
      in.ranks_per_node = 0;
      std::string skip;
      if (st == ShardStrategy::hybrid) {
        int G = base.run.fsdp.shard_group > 0 ? base.run.fsdp.shard_group : std::min(N, hw.devices_per_node);
        if (N % G != 0 || G == N) skip = str("hybrid needs a group G < N that divides N (G = ", G, ")");
        in.run.fsdp.shard_group = G;
      }
      if (!sweep.weak) {
        if (global_seqs % N != 0)
          skip = str(global_seqs, " sequences do not split over ", N, " ranks");
        else
          in.run.B = (int)(global_seqs / N);
      }
      TimePlan p;  // one simulated step: its time and its memory ledger
      if (skip.empty()) {
        try {
          p = plan_time(in, hw);
        } catch (const Error& e) {
          skip = e.what();
        }
      }
      const char* name = FsdpOptions::name(st);
      if (!skip.empty()) {
        if (json)
          out += str("{\"world\": ", N, ", \"shard\": \"", name, "\", \"skipped\": ", json_quote(skip), "}\n");
        else
          out += str(fmt("%6.0f", N), " ", name, ": skipped (", skip, ")\n");
        continue;
      }
      const bool fits = hw.memory_bytes <= 0 || (double)p.device_peak <= hw.memory_bytes;
      const int G = EngineGeometry::shard_group_size(in.run.fsdp, N);
      if (json) {
        out += str("{\"world\": ", N, ", \"shard\": \"", name, "\", \"group\": ", G, ", \"B\": ", in.run.B, ", \"T\": ",
                   in.run.T, ", \"step_ms\": ", ms(p.step_s), ", \"tokens_per_s\": ", p.tokens_per_s,
                   ", \"tokens_per_s_per_rank\": ", p.tokens_per_s / N, ", \"mfu\": ", p.mfu, ", \"compute_ms\": ",
                   ms(p.compute_s), ", \"comm_ms\": ", ms(p.comm_s), ", \"exposed_comm_ms\": ", ms(p.exposed_comm_s),
                   ", \"device_peak_bytes\": ", p.device_peak, ", \"fits\": ", fits ? "true" : "false", "}\n");
      } else {
        std::snprintf(line, sizeof line, "%6d %-8s %5d %4d %11.3f %13.1f %11.1f %6.1f%% %11.3f %11.1f %s\n", N, name, G,
                      in.run.B, ms(p.step_s), p.tokens_per_s, p.tokens_per_s / N, 100 * p.mfu, ms(p.exposed_comm_s),
                      p.device_peak / 1048576.0, hw.memory_bytes > 0 ? (fits ? "yes" : "NO") : "-");
        out += line;
      }
    }
  }
  return out;
}

}  // namespace gpt
