// The start-up report's traffic prediction (src/plan/traffic.h) worked out by hand for a small model:
// Psi from the layout, the strategy's number of gathers, the gather dtype and the reduce dtype, and the
// wording of the line the trainer prints.
#include <gtest/gtest.h>

#include <string>

#include "src/model/layout.h"
#include "src/plan/traffic.h"
#include "tests/common/tiny_config.h"

namespace gpt::test {
namespace {

TEST(Traffic, NoneIsOneAllReducePerStep) {
  const Layout layout(tiny_config(2, 2, 64, 32, 100));
  const double psi = (double)layout.total_numel();
  FsdpOptions o;
  o.strategy = ShardStrategy::none;
  const TrafficPrediction t = predict_traffic(layout, o, 4, 1, DType::F32);
  EXPECT_EQ(t.bytes, (int64_t)(2 * psi * 4 * 3 / 4));  // 2 Psi (N-1)/N fp32 elements
  EXPECT_EQ(t.gathers, 0);
  EXPECT_EQ(t.describe().rfind("traffic per step per rank (predicted): all-reduce 2*Psi*(N-1)/N = ", 0), 0u)
      << t.describe();
  o.reduce_dtype = DType::BF16;  // half the gradient bytes
  EXPECT_EQ(predict_traffic(layout, o, 4, 1, DType::F32).bytes, (int64_t)(2 * psi * 2 * 3 / 4));
}

TEST(Traffic, ShardedStrategiesGatherInTheComputeDtype) {
  const Layout layout(tiny_config(2, 2, 64, 32, 100));
  const double psi = (double)layout.total_numel();
  FsdpOptions o;  // full: 2 all-gathers + 1 reduce-scatter of Psi (G-1)/G
  TrafficPrediction t = predict_traffic(layout, o, 4, 4, DType::F32);
  EXPECT_EQ(t.gathers, 2);
  EXPECT_EQ(t.bytes, (int64_t)((2 * 4 + 4) * psi * 3 / 4));
  EXPECT_EQ(t.describe().rfind("traffic per micro-step per rank (predicted, ~): 2 all-gathers + 1 reduce-scatter of "
                               "Psi*(G-1)/G = ",
                               0),
            0u)
      << t.describe();
  t = predict_traffic(layout, o, 4, 4, DType::BF16);  // cuda: bf16 gathers, fp32 gradients
  EXPECT_EQ(t.bytes, (int64_t)((2 * 2 + 4) * psi * 3 / 4));
  o.strategy = ShardStrategy::grad_op;
  EXPECT_EQ(predict_traffic(layout, o, 4, 4, DType::F32).bytes, (int64_t)((4 + 4) * psi * 3 / 4));
  o.strategy = ShardStrategy::hybrid;  // only the group's share (G = 2 of N = 4)
  o.shard_group = 2;
  EXPECT_EQ(predict_traffic(layout, o, 4, 2, DType::F32).bytes, (int64_t)((4 + 4) * psi / 2));
  o.strategy = ShardStrategy::full;  // one rank moves nothing
  EXPECT_EQ(predict_traffic(layout, o, 1, 1, DType::F32).bytes, 0);
}

}  // namespace
}  // namespace gpt::test
