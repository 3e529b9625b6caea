// The rates one rank sees on a hardware file (src/plan/hardware.h): the compute profile for the run's ranks
// per node and threads per rank (the exact one, else the nearest scaled by the share of the cores a rank
// gets), and the seconds an op takes at them (src/plan/op_costs.h), launch overhead included.
#pragma once
#include <map>
#include <string>
#include <vector>

#include "src/plan/hardware.h"
#include "src/plan/op_costs.h"

namespace gpt {

struct RankRates {
  RateCurve gemm, gemm_backward, gemm_tasks, stream, copy;
  std::map<std::string, RateCurve, std::less<>> kernels;  // (looked up by a literal: no allocation)
  double gemm_edge = 0, gemm_backward_edge = 0;  // the profile's (src/plan/gemm_shape.h): products are priced
                                                 // by their sides too
  double host_bandwidth = 0, pcie_bandwidth = 0, op_overhead = 0, peak = 0;
  bool cpu = true;

  double seconds(const OpCost& o) const;
  double seconds(const OpCosts& ops) const;
};

// Picks the profile for R ranks x `threads` threads per rank. describe: which profile priced the ops;
// notes: the approximation taken when none was calibrated for exactly that.
RankRates rates_for(const HardwareSpec& hw, int R, int threads, std::string* describe, std::vector<std::string>* notes);

}  // namespace gpt
