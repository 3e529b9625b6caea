// See rank_rates.h.
#include "src/plan/rank_rates.h"

#include <algorithm>
#include <cmath>

#include "src/core/check.h"
#include "src/plan/gemm_shape.h"

namespace gpt {

double RankRates::seconds(const OpCost& o) const {
  double s = o.launches * op_overhead;
  if (o.kernel && o.elements > 0 && (o.cls == OpClass::stream || (cpu && o.cls == OpClass::host_stream))) {
    const auto k = kernels.find(o.kernel);
    if (k != kernels.end()) return s + o.elements / k->second.at(o.elements);
  }
  switch (o.cls) {
    case OpClass::gemm:
      return s + (o.flops > 0 ? o.flops / gemm.at(o.mnk) * gemm_shape_factor(o.m, o.n, o.k, gemm_edge) : 0);
    case OpClass::gemm_backward:
      return s + (o.flops > 0 ? o.flops / gemm_backward.at(o.mnk) * gemm_shape_factor(o.m, o.n, o.k, gemm_backward_edge) : 0);
    case OpClass::gemm_tasks: return s + (o.flops > 0 ? o.flops / gemm_tasks.at(o.mnk) : 0);
    case OpClass::stream: return s + (o.bytes > 0 ? o.bytes / stream.at(o.bytes) : 0);
    case OpClass::copy: return s + (o.bytes > 0 ? o.bytes / copy.at(o.bytes) : 0);
    case OpClass::host_stream: return s + (o.bytes > 0 ? o.bytes / (cpu ? stream.at(o.bytes) : host_bandwidth) : 0);
    case OpClass::pcie: return s + (o.bytes > 0 ? o.bytes / (cpu ? copy.at(o.bytes) : pcie_bandwidth) : 0);
  }
  return s;
}

double RankRates::seconds(const OpCosts& ops) const {
  double s = 0;
  for (const OpCost& o : ops) s += seconds(o);
  return s;
}

// The nearest profile (same threads first), scaled by the cores a rank gets: min(1, cores / (ranks *
// threads)) * threads.
RankRates rates_for(const HardwareSpec& hw, int R, int threads, std::string* describe, std::vector<std::string>* notes) {
  GPT_CHECK(!hw.profiles.empty(), "--hardware ", hw.file, ": no compute profile");
  const ComputeProfile* best = nullptr;
  double best_d = 1e300;
  for (const ComputeProfile& p : hw.profiles) {
    const double d = std::fabs(std::log((double)p.ranks / R)) + 4 * std::fabs(std::log((double)p.threads / threads));
    if (d < best_d) best = &p, best_d = d;
  }
  double scale = 1;
  if (hw.kind == "cpu") {
    auto cores_of = [&](int ranks, int thr) { return thr * std::min(1.0, (double)hw.cores / ((double)ranks * thr)); };
    scale = cores_of(R, threads) / cores_of(best->ranks, best->threads);
  }
  RankRates r;
  r.cpu = hw.kind == "cpu";
  r.gemm = best->gemm.scaled(scale);
  r.gemm_backward = best->gemm_backward.scaled(scale);
  r.gemm_edge = best->gemm_edge;
  r.gemm_backward_edge = best->gemm_backward_edge;
  for (const auto& [fam, c] : best->kernels) r.kernels[fam] = c.scaled(scale);
  r.gemm_tasks = best->gemm_tasks.scaled(scale);
  r.stream = best->stream.scaled(scale);
  r.copy = best->copy.scaled(std::min(1.0, scale));  // copies are single-threaded: scaled down, never up
  r.host_bandwidth = hw.host_bandwidth;
  r.pcie_bandwidth = hw.pcie_bandwidth;
  r.op_overhead = hw.op_overhead;
  r.peak = hw.kind == "cpu" ? r.gemm.max_y() : hw.peak_flops;
  *describe = hw.kind == "cpu" ? str("profile ", best->ranks, " ranks x ", best->threads, " threads")
                               : std::string("device profile");
  if (hw.kind == "cpu" && (best->ranks != R || best->threads != threads)) {
    *describe += str(" scaled x", scale, " for ", R, " ranks x ", threads, " threads on ", hw.cores, " cores");
    notes->push_back(str("no profile calibrated for ", R, " ranks x ", threads, " threads: ", *describe,
                         " (calibrate with mpirun -n ", R, " gpt bench --calibrate)"));
  }
  return r;
}

}  // namespace gpt
