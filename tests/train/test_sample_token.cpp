// sample_token, the draw behind gpt sample and the trainer's samples, against its closed-form distribution:
// the frequencies of many draws stay within 5 standard deviations of softmax(logits / temperature)
// restricted to the top-k tokens or to the smallest set reaching the nucleus mass top-p (a count of n draws
// with probability p has sd sqrt(n p (1 - p)); beyond 5 sd a correct sampler fails with probability
// 5.7e-7 per count). Greedy picks the argmax, the lowest index among ties; bad parameters are refused.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "src/core/check.h"
#include "src/train/generate.h"

namespace gpt::test {
namespace {

// logits log(1..4): probabilities 0.1, 0.2, 0.3, 0.4 at temperature 1.
std::vector<float> ramp() { return {0.0f, std::log(2.0f), std::log(3.0f), std::log(4.0f)}; }

void expect_frequencies(const SampleParams& p, const std::vector<double>& want, uint64_t seed) {
  const int n = 40000;
  Rng rng(seed);
  std::vector<int> count(want.size(), 0);
  for (int i = 0; i < n; i++) {
    const int id = sample_token(ramp(), p, rng);
    ASSERT_TRUE(id >= 0 && id < (int)want.size()) << id;
    count[id]++;
  }
  for (size_t k = 0; k < want.size(); k++) {
    const double sd = std::sqrt(n * want[k] * (1 - want[k]));
    EXPECT_NEAR(count[k], n * want[k], 5 * sd + 1e-9) << "token " << k << " (temperature " << p.temperature
                                                         << ", top-k " << p.top_k << ", top-p " << p.top_p << ")";
  }
}

TEST(SampleToken, FrequenciesFollowTheDistribution) {
  SampleParams p;
  expect_frequencies(p, {0.1, 0.2, 0.3, 0.4}, 1);
  p.temperature = 2;  // probabilities proportional to sqrt(1..4)
  const double z = 1 + std::sqrt(2.0) + std::sqrt(3.0) + 2;
  expect_frequencies(p, {1 / z, std::sqrt(2.0) / z, std::sqrt(3.0) / z, 2 / z}, 2);
}

TEST(SampleToken, TopKAndTopPCutTheTail) {
  SampleParams p;
  p.top_k = 2;  // tokens 3 and 2, renormalised: 4/7, 3/7
  expect_frequencies(p, {0, 0, 3.0 / 7, 4.0 / 7}, 3);
  p.top_k = 0;
  p.top_p = 0.5f;  // 0.4 < 0.5, 0.4 + 0.3 >= 0.5: the same two tokens
  expect_frequencies(p, {0, 0, 3.0 / 7, 4.0 / 7}, 4);
  p.top_p = 0.35f;  // 0.4 alone reaches it
  expect_frequencies(p, {0, 0, 0, 1}, 5);
}

TEST(SampleToken, GreedyTakesTheFirstLargest) {
  SampleParams p;
  p.temperature = 0;
  Rng rng(7);
  EXPECT_EQ(sample_token(ramp(), p, rng), 3);
  EXPECT_EQ(sample_token({1.0f, 5.0f, 5.0f, -2.0f}, p, rng), 1);
  p.temperature = 1;
  p.top_k = 1;  // one token left: the largest, whatever the draw
  for (int i = 0; i < 100; i++) ASSERT_EQ(sample_token({1.0f, 5.0f, 4.9f, -2.0f}, p, rng), 1);
}

TEST(SampleToken, RefusesBadParameters) {
  Rng rng(1);
  SampleParams p;
  p.temperature = -1;
  EXPECT_THROW(sample_token(ramp(), p, rng), Error);
  p.temperature = NAN;
  EXPECT_THROW(sample_token(ramp(), p, rng), Error);
  p = SampleParams();
  p.top_k = -1;
  EXPECT_THROW(sample_token(ramp(), p, rng), Error);
  p = SampleParams();
  p.top_p = 0;
  EXPECT_THROW(sample_token(ramp(), p, rng), Error);
  p.top_p = 1.5f;
  EXPECT_THROW(sample_token(ramp(), p, rng), Error);
}

}  // namespace
}  // namespace gpt::test
