// Softmax cross-entropy over the first V of Vp columns: losses against a naive double loop, the fused
// backward against finite differences of dloss * sum(losses), padding columns ignored by the forward and
// exactly 0 in dlogits, the training pass's running loss total (the row sum of its losses, added in double),
// and out-of-range targets rejected.
#include "tests/ops/op_test_util.h"

namespace gpt::test {
namespace {

std::vector<double> losses_ref(const std::vector<double>& logits, const std::vector<int>& targets, int N, int V,
                               int Vp) {
  std::vector<double> loss(N);
  for (int i = 0; i < N; i++) {
    const double* l = &logits[i * Vp];
    double mx = l[0], sum = 0;
    for (int j = 1; j < V; j++) mx = std::max(mx, l[j]);
    for (int j = 0; j < V; j++) sum += std::exp(l[j] - mx);
    loss[i] = std::log(sum) + mx - l[targets[i]];
  }
  return loss;
}

// Logits with huge values in the padding columns: any leak into the softmax would dominate it.
std::vector<float> make_logits(int N, int V, int Vp, double scale, uint64_t seed) {
  auto l = randn(N * Vp, seed, scale);
  for (int i = 0; i < N; i++)
    for (int j = V; j < Vp; j++) l[i * Vp + j] = 80.0f;
  return l;
}

void check(int N, int V, int Vp, double scale, std::vector<int> targets, uint64_t seed) {
  auto be = cpu_backend();
  auto logits = make_logits(N, V, Vp, scale, seed);
  auto ld = to_double(logits);
  auto ref = losses_ref(ld, targets, N, V, Vp);

  std::vector<float> losses(N), losses2(N, -1.0f);
  be->classifier_forward(losses.data(), logits.data(), targets.data(), N, V, Vp);
  // log-sum-exp in float over V terms: ~1e-6 relative to log(V) + |logit| scale.
  EXPECT_TRUE(all_close(losses, ref, 1e-5 * (1 + scale), 1e-5)) << "V=" << V;

  const float dloss = 0.37f;
  auto dl = logits;
  double loss_sum = 0.25;  // backward adds the row sum of the losses to it
  be->classifier_backward(dl.data(), losses2.data(), &loss_sum, targets.data(), dloss, N, V, Vp);
  EXPECT_TRUE(all_close(losses2, ref, 1e-5 * (1 + scale), 1e-5));
  double want = 0;
  for (int i = 0; i < N; i++) want += losses2[i];  // the same doubles added in row order: exact
  EXPECT_EQ(loss_sum, 0.25 + want);

  auto L = [&]() {
    double s = 0;
    for (double x : losses_ref(ld, targets, N, V, Vp)) s += dloss * x;
    return s;
  };
  for (int i = 0; i < N; i++) {
    for (int j = 0; j < V; j++) {
      size_t at = static_cast<size_t>(i) * Vp + j;
      if (V > 64 && j % 17 != 0 && j != targets[i]) continue;  // sample wide rows
      double expect = central_diff(L, ld, at);
      // dloss * (p - onehot) with p from float exp/sum: ~1e-7 absolute.
      ASSERT_NEAR(dl[at], expect, 1e-6 + 1e-5 * std::fabs(expect)) << "row " << i << " col " << j;
    }
    for (int j = V; j < Vp; j++) ASSERT_EQ(dl[static_cast<size_t>(i) * Vp + j], 0.0f) << "padding col " << j;
  }
}

TEST(Classifier, SmallVocabWithPadding) { check(4, 11, 16, 2.0, {0, 10, 3, 3}, 1); }
TEST(Classifier, SingleRowNoPadding) { check(1, 7, 7, 1.0, {6}, 2); }
TEST(Classifier, WideVocabLargeLogits) { check(3, 1000, 1024, 8.0, {999, 0, 517}, 3); }

TEST(Classifier, TargetsOutsideTheVocabAreErrors) {
  auto be = cpu_backend();
  std::vector<float> logits(2 * 8, 0.0f), losses(2);
  std::vector<int> at_v{1, 5}, negative{-1, 0};  // V = 5: id 5 is padding, not a token
  EXPECT_THROW(be->classifier_forward(losses.data(), logits.data(), at_v.data(), 2, 5, 8), gpt::Error);
  EXPECT_THROW(be->classifier_backward(logits.data(), losses.data(), nullptr, negative.data(), 1.0f, 2, 5, 8),
               gpt::Error);
}

}  // namespace
}  // namespace gpt::test
