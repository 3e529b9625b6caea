// See plan_report.h.
#include "src/cli/plan_report.h"

#include <cstdio>

#include "src/core/check.h"
#include "src/io/json_min.h"

namespace gpt {
namespace {

std::string budget_text(const PlanBudget& b) {
  auto size = [](int64_t x) { return x < 0 ? std::string("no limit") : format_bytes(x); };
  if (b.one_ram) return str(size(b.device), " per rank (device and host are one RAM)");
  return str(size(b.device), " device, ", size(b.host), " host per rank");
}

std::string stats_text(const PlanStats& s) {
  return str("searched ", s.space, " configurations in ", s.search_s, " s: ", s.no_fit, " do not fit, ", s.dominated,
             " dominated, ", s.bounded, " bounded out (", s.bounded_by_channel, " by the channel), ", s.priced,
             " priced (", s.bound_sims, " more steps simulated for the bounds)");
}

// "--tp 1, 2 or 4 (world 1024 = dp x tp)", or the one size pinned.
std::string tp_sizes_text(const PlanRequest& rq, const PlanResult& r) {
  std::string s;
  for (size_t i = 0; i < r.tp_searched.size(); i++)
    s += str(i == 0 ? "" : i + 1 == r.tp_searched.size() ? " or " : ", ", r.tp_searched[i]);
  return str("meshes searched: --tp ", s, " (world ", rq.base.world, " = data-parallel x tensor-parallel ranks)");
}

std::string header_text(const PlanRequest& rq, const std::string& model) {
  const MemPlanInput& b = rq.base;
  return str("plan for ", model, " (", b.cfg.describe(), ") on ", b.world, " x ", rq.hw->name, " (", rq.hw->file,
             "), total batch ", rq.total_batch, " tokens, T=", b.T, ", ", dtype_name(b.compute), " compute",
             b.compute == DType::BF16 ? str(", attention ", attention_path_name(b.attention)) : std::string(),
             "\nbudget ", budget_text(rq.budget), ", pre-flight margin (", 100 * rq.budget.margin, "% + ",
             format_bytes(rq.budget.margin_bytes), ") included\n");
}

// rank 0: a row outside the top (a random sample's, another size's fastest), marked "-".
std::string row_text(int rank, const PlanCandidate& c, const PlanRequest& rq) {
  char line[256];
  const TimePlan& t = c.time;
  const TpOptions& tp = c.choice.tp;
  std::snprintf(line, sizeof line, "%3s %13.1f %6.1f%% %10.2f %10.2f %12s %12s %3d %3s   ",
                rank ? std::to_string(rank).c_str() : "-", t.tokens_per_s,
                100 * t.mfu, 1e3 * t.step_s, 1e3 * t.exposed_comm_s, format_bytes(t.device_peak).c_str(),
                format_bytes(t.host_peak).c_str(), tp.size, tp.size == 1 ? "-" : tp.sequence_parallel ? "on" : "off");
  return line + c.choice.flags(rq.base.T, rq.total_batch) + "\n";
}

std::string join_ints(const std::vector<int>& v) {
  std::string s;
  for (size_t i = 0; i < v.size(); i++) s += str(i ? ", " : "", v[i]);
  return s;
}

std::string why_text(const PlanResult& r) {
  std::string out;
  if (r.top.size() > 1)
    out += "why: " + why_slower(r.top[0], r.top[1], "#2") + "\n";
  else
    out += "why: nothing else fits that is not dominated or bounded out\n";
  return out;
}

// Each tensor-parallel size #1 does not use: its fastest priced candidate and why it is slower, or, where
// every one was bounded out, the least bound (none is faster).
std::string other_tp_text(const PlanRequest& rq, const PlanResult& r) {
  std::string rows, why;
  for (const OtherTp& o : r.other_tp) {
    const std::string name = str("--tp ", o.tp);
    if (o.fastest) {
      rows += row_text(0, *o.fastest, rq);
      why += str("why not ", name, ": ", why_slower(r.top[0], *o.fastest, name + "'s fastest"),
                 o.exact ? std::string() : str(" (of the ", o.priced, " of its ", o.candidates, " priced; the others bounded out: --per-tp prices it exactly)"), "\n");
    } else {
      const StepBound& b = o.least_bound;
      char line[240];
      std::snprintf(line, sizeof line, "%.2f ms (compute %.2f + its group's collectives %.2f + reductions %.2f), above "
                    "#%zu's %.2f ms", 1e3 * b.total(), 1e3 * b.compute, 1e3 * b.tp, 1e3 * b.scalars, r.top.size(),
                    1e3 * r.top.back().time.step_s);
      why += str("why not ", name, ": none of its ", o.candidates, " candidates can be faster than ", line, "\n");
    }
  }
  return rows.empty() ? why : "the fastest priced of each other tensor-parallel size:\n" + rows + why;
}

std::string candidate_json(int rank, const PlanCandidate& c, const PlanRequest& rq) {
  const TimePlan& t = c.time;
  const StepPhases& p = t.phases;
  return str("{\"rank\": ", rank, ", \"flags\": ", json_quote(c.choice.flags(rq.base.T, rq.total_batch)),
             ", \"tp\": ", c.choice.tp.size, ", \"sequence_parallel\": ", c.choice.tp.sequence_parallel ? "true" : "false",
             ", \"dp\": ", rq.base.world / c.choice.tp.size,
             ", \"tokens_per_s\": ", t.tokens_per_s, ", \"mfu\": ", t.mfu, ", \"step_s\": ", t.step_s,
             ", \"exposed_comm_s\": ", t.exposed_comm_s, ", \"compute_bound_s\": ", c.bound_s,
             ", \"device_peak_bytes\": ", t.device_peak, ", \"host_peak_bytes\": ", t.host_peak,
             ", \"device_need_bytes\": ", c.device_need, ", \"host_need_bytes\": ", c.host_need,
             ", \"phases_s\": {\"forward\": ", p.forward, ", \"recompute\": ", p.recompute, ", \"backward\": ", p.backward,
             ", \"engine\": ", p.engine, ", \"copies\": ", p.copies, ", \"exposed_comm\": ", p.exposed_comm,
             ", \"optimizer\": ", p.optimizer, ", \"host_wait\": ", p.host_wait, "}}");
}

// How far apart the top candidates are predicted: when that is less than the time model's error on the hardware,
// the order among them is the model's, not a measurement's.
std::string spread_text(const std::vector<PlanCandidate>& top) {
  const double first = top.front().time.tokens_per_s, last = top.back().time.tokens_per_s;
  char pct[32];
  std::snprintf(pct, sizeof pct, "%.1f%%", 100 * (first - last) / first);
  return str("the top ", top.size(), " are predicted within ", pct, " of #1; candidates closer than the time model's "
             "error on this hardware (docs/results/time_model/README.md) are not ordered by it: time them (gpt bench)");
}

}  // namespace

std::string plan_text(const PlanRequest& rq, const PlanResult& r, const std::string& model) {
  std::string out = header_text(rq, model) + tp_sizes_text(rq, r) + "\n" + stats_text(r.stats) + "\n";
  out += "  # tokens/s (all)    MFU    step ms  exposed ms  device peak    host peak  tp  sp   flags\n";
  for (size_t i = 0; i < r.top.size(); i++) out += row_text((int)i + 1, r.top[i], rq);
  out += why_text(r) + other_tp_text(rq, r);
  if (!r.sample.empty()) {
    out += "drawn at random from the rest of the feasible space:\n";
    for (const PlanCandidate& c : r.sample) out += row_text(0, c, rq);
  }
  if (r.top.size() > 2) out += "note: " + spread_text(r.top) + "\n";
  for (const std::string& n : r.top[0].time.notes) out += "note: " + n + "\n";
  for (const PlanCandidate& c : r.top)
    if (c.choice.reduce == DType::BF16) {
      out += "note: --reduce-dtype bf16 rounds every gradient once more on the wire; pin --reduce-dtype fp32 to keep "
             "reductions exact\n";
      break;
    }
  return out;
}

std::string plan_json(const PlanRequest& rq, const PlanResult& r, const std::string& model) {
  const PlanStats& s = r.stats;
  std::string top, sample, other;
  for (size_t i = 0; i < r.top.size(); i++) top += str(i ? ", " : "", candidate_json((int)i + 1, r.top[i], rq));
  for (size_t i = 0; i < r.sample.size(); i++) sample += str(i ? ", " : "", candidate_json(0, r.sample[i], rq));
  for (size_t i = 0; i < r.other_tp.size(); i++) {
    const OtherTp& o = r.other_tp[i];
    other += str(i ? ", " : "", "{\"tp\": ", o.tp, ", \"candidates\": ", o.candidates, ", \"priced\": ", o.priced,
                 ", \"exact\": ", o.exact ? "true" : "false", ", \"least_bound_s\": ", o.least_bound.total(),
                 ", \"fastest\": ", o.fastest ? candidate_json(0, *o.fastest, rq) : std::string("null"), ", \"why\": ",
                 json_quote(o.fastest ? why_slower(r.top[0], *o.fastest, str("--tp ", o.tp, "'s fastest")) : std::string()),
                 "}");
  }
  const PlanBudget& b = rq.budget;
  return str("{\"model\": ", json_quote(model), ", \"psi\": ", rq.base.cfg.num_params(), ", \"world\": ", rq.base.world,
             ", \"T\": ", rq.base.T, ", \"total_batch\": ", rq.total_batch, ", \"hardware\": ", json_quote(rq.hw->name),
             ", \"hardware_file\": ", json_quote(rq.hw->file), ", \"tp_searched\": [", join_ints(r.tp_searched), "]", ", \"budget_device_bytes\": ", b.device,
             ", \"budget_host_bytes\": ", b.host, ", \"one_ram\": ", b.one_ram ? "true" : "false",
             ", \"stats\": {\"space\": ", s.space, ", \"no_fit\": ", s.no_fit, ", \"dominated\": ", s.dominated,
             ", \"bounded\": ", s.bounded, ", \"bounded_by_channel\": ", s.bounded_by_channel, ", \"priced\": ", s.priced,
             ", \"bound_sims\": ", s.bound_sims, ", \"search_s\": ", s.search_s, "}, \"top\": [", top,
             "], \"sample\": [", sample, "], \"other_tp\": [", other, "], \"why\": ",
             json_quote(r.top.size() > 1 ? why_slower(r.top[0], r.top[1], "#2") : std::string()), "}\n");
}

std::string plan_auto_line(const PlanRequest& rq, const PlanResult& r) {
  const PlanCandidate& c = r.top[0];
  char pred[160];
  std::snprintf(pred, sizeof pred, "predicted %.1f tokens/s, MFU %.1f%%, device peak %s", c.time.tokens_per_s,
                100 * c.time.mfu, format_bytes(c.time.device_peak).c_str());
  return str("--plan auto: ", c.choice.flags(rq.base.T, rq.total_batch), " (", pred, "; ", rq.hw->name, "; ",
             r.stats.space, " configurations searched in ", r.stats.search_s, " s)");
}

}  // namespace gpt
