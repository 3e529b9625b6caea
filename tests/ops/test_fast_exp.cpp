// The vectorisable exp used by softmax and GELU, against std::exp in double over its whole range:
// relative error within a few ulp, exact 0 below the underflow cut and +inf above the overflow cut.
#include <limits>

#include "kernels/cpu/ops.h"
#include "tests/ops/op_test_util.h"

namespace gpt::test {
namespace {

TEST(FastExp, RelativeErrorWithinFewUlp) {
  double worst = 0.0;
  for (int i = 0; i <= 200000; i++) {
    float x = -87.0f + 175.0f * static_cast<float>(i) / 200000.0f;  // -87 .. 88
    double expect = std::exp(static_cast<double>(x));
    double rel = std::fabs(cpu::fast_exp(x) - expect) / expect;
    worst = std::max(worst, rel);
  }
  // float ulp is 2^-23 = 1.19e-7 relative at worst: allow 3 ulp.
  EXPECT_LT(worst, 3.6e-7);
  EXPECT_EQ(cpu::fast_exp(0.0f), 1.0f);
}

TEST(FastExp, SaturatesCleanly) {
  EXPECT_EQ(cpu::fast_exp(-88.0f), 0.0f);
  EXPECT_EQ(cpu::fast_exp(-1e30f), 0.0f);
  EXPECT_EQ(cpu::fast_exp(-std::numeric_limits<float>::infinity()), 0.0f);
  EXPECT_EQ(cpu::fast_exp(89.0f), std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::isnan(cpu::fast_exp(std::numeric_limits<float>::quiet_NaN())));
}

}  // namespace
}  // namespace gpt::test
