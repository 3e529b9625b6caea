// Why: a row-parallel product (tensor parallelism) adds its bias once, after the reduction of the partial
// products, with bias_forward, and takes its gradient with bias_backward. These check the cpu ops against double
// loops and against matmul: the gradient must be matmul_backward's dbias bit for bit (the same loop), so a bias
// trained on its own follows the one inside a matmul exactly.
//
// Bounds (u = 2^-24, gamma_n as in op_test_util.h): bias_forward is one correctly rounded fp32 addition of two
// floats, whose double sum is exact, so within u |ref|; bias_backward sums a column's N rows from 0 (N - 1
// roundings) and adds that to the starting value (one more), within gamma_N * (|start| + sum |dout|).
#include "tests/ops/op_test_util.h"

namespace gpt::test {
namespace {

TEST(Bias, ForwardAddsTheBiasToEveryRow) {
  const int N = 9, OC = 300;
  auto be = cpu_backend();
  auto x = randn(static_cast<size_t>(N) * OC, 1), bias = randn(OC, 2);
  std::vector<double> ref(x.size()), bound(x.size());
  for (int i = 0; i < N; i++)
    for (int o = 0; o < OC; o++) {
      const size_t k = static_cast<size_t>(i) * OC + o;
      ref[k] = static_cast<double>(x[k]) + bias[o];
      bound[k] = kUnitRoundoff * std::fabs(ref[k]);
    }
  be->bias_forward(x.data(), bias.data(), N, OC);
  EXPECT_TRUE(all_within(x, ref, bound));
}

TEST(Bias, BackwardIsTheColumnSumsAndMatmulBackwardsDbias) {
  auto be = cpu_backend();
  // A partial column block (531 = 2 x 256 + 19) and a single row.
  for (const auto& [N, OC] : {std::pair{300, 531}, std::pair{1, 17}}) {
    auto dout = randn(static_cast<size_t>(N) * OC, 10 + N);
    const auto start = randn(OC, 20 + N);
    std::vector<double> ref(start.begin(), start.end()), bound(OC);
    for (int o = 0; o < OC; o++) {
      double abs_sum = std::fabs(start[o]);
      for (int i = 0; i < N; i++) {
        const double d = dout[static_cast<size_t>(i) * OC + o];
        ref[o] += d, abs_sum += std::fabs(d);
      }
      bound[o] = gamma_n(N) * abs_sum;
    }
    auto dbias = start;
    be->bias_backward(dbias.data(), dout.data(), N, OC);
    EXPECT_TRUE(all_within(dbias, ref, bound)) << "N=" << N << " OC=" << OC;

    // matmul_backward's dbias of the same dout (any input and weights: they do not enter dbias)
    const int C = 3;
    auto inp = randn(static_cast<size_t>(N) * C, 30), w = randn(static_cast<size_t>(OC) * C, 31);
    std::vector<float> dw(static_cast<size_t>(OC) * C, 0.0f);
    auto matmul_dbias = start;
    be->matmul_backward(nullptr, dw.data(), matmul_dbias.data(), dout.data(), inp.data(), w.data(), N, C, OC);
    EXPECT_EQ(dbias, matmul_dbias) << "N=" << N << " OC=" << OC;
  }
}

}  // namespace
}  // namespace gpt::test
