// See preflight.h.
#include "src/plan/preflight.h"

#include <functional>
#include <vector>

#include "src/core/check.h"
#include "src/core/size_math.h"

namespace gpt {
namespace {

bool device_is_host(const MemoryAvailable& a) { return a.device < 0; }

// One candidate: a change to the run and how to say it.
struct Candidate {
  std::string flags;
  std::function<void(MemPlanInput&)> apply;
};

std::vector<Candidate> single_levers(const MemPlanInput& run, const MemoryAvailable& avail) {
  std::vector<Candidate> c;
  using M = RecomputePolicy::Mode;
  if (run.recompute.mode == M::none)
    c.push_back({"--recompute selective", [](MemPlanInput& in) { in.recompute = RecomputePolicy::parse("selective"); }});
  if (run.world > 1 && run.fsdp.strategy != ShardStrategy::full)
    c.push_back({"--shard full", [](MemPlanInput& in) {
                   in.fsdp.strategy = ShardStrategy::full;
                   in.fsdp.shard_group = 0;
                 }});
  if (!device_is_host(avail) && run.fsdp.offload == OffloadMode::none)
    c.push_back({"--offload optimizer", [](MemPlanInput& in) { in.fsdp.offload = OffloadMode::optimizer; }});
  if (!device_is_host(avail) && run.fsdp.offload != OffloadMode::params)
    c.push_back({"--offload params", [](MemPlanInput& in) { in.fsdp.offload = OffloadMode::params; }});
  if (run.recompute.mode != M::full)
    c.push_back({"--recompute full", [](MemPlanInput& in) { in.recompute = RecomputePolicy::parse("full"); }});
  return c;
}

std::string join(const std::string& a, const std::string& b) { return a.empty() ? b : a + " " + b; }

// Every lever at once. Of the candidates that set one flag (--recompute selective, then full; --offload
// optimizer, then params) only the last, the strongest, is kept: the suggestion must be a command line gpt
// accepts, and gpt refuses a flag given twice.
std::vector<Candidate> strongest_per_flag(const std::vector<Candidate>& singles) {
  auto flag_of = [](const Candidate& c) { return c.flags.substr(0, c.flags.find(' ')); };
  std::vector<Candidate> out;
  for (size_t i = 0; i < singles.size(); i++) {
    bool superseded = false;
    for (size_t j = i + 1; j < singles.size(); j++) superseded = superseded || flag_of(singles[j]) == flag_of(singles[i]);
    if (!superseded) out.push_back(singles[i]);
  }
  return out;
}

std::string domain_line(const char* name, int64_t need, int64_t have, const std::string& source) {
  return str(name, " needs ", format_bytes(need), ", ", format_bytes(have), " available", source.empty() ? "" : " (",
             source, source.empty() ? "" : ")");
}

}  // namespace

int64_t preflight_with_margin(int64_t bytes, const PreflightSpec& s) {
  return sat_add({bytes, (int64_t)((double)bytes * s.margin), s.margin_bytes});
}

PreflightNeed preflight_need(const PreflightSpec& spec, const MemoryAvailable& avail) {
  const MemPlan p = plan_memory(spec.run);
  PreflightNeed n;
  const int64_t per_rank_host = device_is_host(avail) ? sat_add({p.device_peak, p.host_peak}) : p.host_peak;
  n.host = sat_mul({spec.ranks_per_node, preflight_with_margin(per_rank_host, spec)});
  n.device = device_is_host(avail) ? 0 : preflight_with_margin(p.device_peak, spec);
  n.fits = n.host <= avail.host && (device_is_host(avail) || n.device <= avail.device);
  return n;
}

Lever cheapest_lever(const PreflightSpec& spec, const MemoryAvailable& avail) {
  auto try_flags = [&](const std::string& flags, const std::function<void(MemPlanInput&)>& apply, Lever& out) {
    PreflightSpec s = spec;
    apply(s.run);
    try {
      out.need = preflight_need(s, avail);
    } catch (const Error&) {
      return false;  // a lever the planner refuses (e.g. too large to plan) does not fit
    }
    out.flags = flags;
    return out.need.fits;
  };
  Lever l;
  const std::vector<Candidate> singles = single_levers(spec.run, avail);
  for (const Candidate& c : singles)
    if (try_flags(c.flags, c.apply, l)) return l;
  // All of them together, then with smaller micro-batches (the global batch kept by accumulation).
  std::string all_flags;
  std::function<void(MemPlanInput&)> all = [](MemPlanInput&) {};
  const std::vector<Candidate> combined = strongest_per_flag(singles);
  for (const Candidate& c : combined) {
    all_flags = join(all_flags, c.flags);
    all = [prev = all, next = c.apply](MemPlanInput& in) { prev(in), next(in); };
  }
  if (combined.size() > 1 && try_flags(all_flags, all, l)) return l;
  const int64_t total = (int64_t)spec.run.B * spec.run.T * spec.run.world;
  for (int b = spec.run.B / 2; b >= 1; b /= 2) {
    const std::string flags = join(all_flags, str("-B ", b, " --total-batch ", total));
    if (try_flags(flags, [&](MemPlanInput& in) { all(in), in.B = b; }, l)) return l;
  }
  // More ranks with --shard full, each node holding as many ranks as this one.
  for (int world = spec.run.world * 2; world <= 65536; world *= 2) {
    const std::string flags = str("--shard full at ", world, " ranks (", spec.ranks_per_node, " per node)");
    auto more = [&](MemPlanInput& in) {
      in.world = world;
      in.fsdp.strategy = ShardStrategy::full;
      in.fsdp.shard_group = 0;
    };
    if (try_flags(flags, more, l)) return l;
  }
  return Lever{};
}

void preflight_check(const PreflightSpec& spec, const MemoryAvailable& avail, const std::string& what) {
  const PreflightNeed n = preflight_need(spec, avail);
  if (n.fits) return;
  std::string need;
  if (device_is_host(avail)) {
    need = domain_line(str("host memory for ", spec.ranks_per_node, " rank(s) of this node").c_str(), n.host, avail.host,
                       avail.host_source);
  } else {
    need = domain_line("each GPU", n.device, avail.device, "free device memory");
    if (n.host > avail.host)
      need += "; " + domain_line("pinned host memory", n.host, avail.host, avail.host_source);
  }
  const Lever l = cheapest_lever(spec, avail);
  const std::string lever =
      l.flags.empty() ? "no lever fits, not even every memory lever with -B 1 and up to 65536 ranks"
                      : str("cheapest lever that fits: ", l.flags, " (needs ",
                            format_bytes(device_is_host(avail) ? l.need.host : l.need.device), ")");
  fail(what, ": this run does not fit in memory: ", need, " (margin included); ", lever,
       "; --no-preflight skips this check");
}

}  // namespace gpt
