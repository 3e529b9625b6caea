// See traffic.h.
#include "src/plan/traffic.h"

#include "src/core/check.h"

namespace gpt {

namespace {
double mib(int64_t b) { return b / 1048576.0; }
}  // namespace

TrafficPrediction predict_traffic(const Layout& layout, const FsdpOptions& fsdp, int world, int group, DType compute) {
  const double psi = (double)layout.total_numel();
  const double rs = (double)dtype_size(fsdp.reduce_dtype);  // gradient bytes per element on the wire
  TrafficPrediction t;
  t.strategy = fsdp.strategy;
  if (fsdp.strategy == ShardStrategy::none) {
    t.bytes = (int64_t)(2 * psi * rs * (world - 1) / world);
    return t;
  }
  const double f = world > 1 ? (double)(group - 1) / group : 0.0;  // the fraction of Psi that moves
  t.gathers = fsdp.strategy == ShardStrategy::full ? 2.0 : 1.0;
  t.bytes = (int64_t)((t.gathers * dtype_size(compute) + rs) * psi * f);
  return t;
}

std::string TrafficPrediction::describe() const {
  if (strategy == ShardStrategy::none)
    return str("traffic per step per rank (predicted): all-reduce 2*Psi*(N-1)/N = ", mib(bytes), " MiB");
  return str("traffic per micro-step per rank (predicted, ~): ", gathers,
             " all-gathers + 1 reduce-scatter of Psi*(G-1)/G = ", mib(bytes), " MiB");
}

}  // namespace gpt
