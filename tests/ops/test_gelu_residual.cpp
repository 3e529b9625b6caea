// GELU (tanh approximation) against the textbook formula in double, its backward against finite
// differences (including saturated and huge inputs), and the residual add and its += backward.
#include "tests/ops/op_test_util.h"

namespace gpt::test {
namespace {

double gelu_ref(double x) {
  const double k = std::sqrt(2.0 / std::acos(-1.0));
  return 0.5 * x * (1.0 + std::tanh(k * (x + 0.044715 * x * x * x)));
}

std::vector<float> gelu_inputs() {
  auto x = randn(37, 1, 2.0);  // 37: not a multiple of any vector width
  for (float v : {0.0f, -3.0f, 3.0f, -8.0f, 8.0f, -30.0f, 30.0f, 1e-3f, -1e-3f}) x.push_back(v);
  return x;
}

TEST(Gelu, ForwardMatchesFormula) {
  auto be = cpu_backend();
  auto x = gelu_inputs();
  x.push_back(-1e30f);  // far saturated: exactly -0 in exact arithmetic, must not be NaN
  x.push_back(1e30f);
  std::vector<float> out(x.size());
  be->gelu_forward(out.data(), x.data(), x.size());
  std::vector<double> ref(x.size());
  for (size_t i = 0; i < x.size(); i++) ref[i] = std::isinf(x[i] * (double)x[i] * x[i]) ? (x[i] > 0 ? x[i] : 0.0)
                                                                                    : gelu_ref(x[i]);
  // A few float ops and one exp (~2 ulp): relative error ~1e-6; absolute floor for tiny outputs.
  EXPECT_TRUE(all_close(out, ref, 1e-7, 2e-6));
}

TEST(Gelu, BackwardMatchesFiniteDifferences) {
  auto be = cpu_backend();
  auto x = gelu_inputs();
  auto dout = randn(x.size(), 2);
  std::vector<float> dinp(x.size(), 5.0f);
  be->gelu_backward(dinp.data(), x.data(), dout.data(), x.size());
  auto xd = to_double(x);
  std::vector<double> expect(x.size());
  for (size_t i = 0; i < x.size(); i++) {
    auto L = [&]() { return dout[i] * gelu_ref(xd[i]); };
    expect[i] = central_diff(L, xd, i);
  }
  // Derivative assembled from a sigmoid and a few products: ~1e-6 relative, 1e-6 absolute floor.
  EXPECT_TRUE(all_close(dinp, expect, 1e-6, 5e-6));

  std::vector<float> huge{-1e30f, 1e30f, -1e5f, 1e5f}, dh{1.0f, 1.0f, 1.0f, 1.0f}, gh(4);
  be->gelu_backward(gh.data(), huge.data(), dh.data(), 4);
  EXPECT_EQ(gh[0], 0.0f);  // saturated: derivative 0 (not NaN)
  EXPECT_EQ(gh[1], 1.0f);  // saturated: derivative 1
  EXPECT_EQ(gh[2], 0.0f);
  EXPECT_EQ(gh[3], 1.0f);
}

TEST(Gelu, LargeBufferTakesTheParallelPath) {
  auto be = cpu_backend();
  size_t n = 100003;
  auto x = randn(n, 3, 3.0), dout = randn(n, 4);
  std::vector<float> out(n), dinp(n);
  be->gelu_forward(out.data(), x.data(), n);
  be->gelu_backward(dinp.data(), x.data(), dout.data(), n);
  const double k = std::sqrt(2.0 / std::acos(-1.0));
  std::vector<double> ref(n), dref(n);
  for (size_t i = 0; i < n; i++) {
    double v = x[i], u = k * (v + 0.044715 * v * v * v), th = std::tanh(u);
    ref[i] = gelu_ref(v);  // closed-form derivative (checked against differences above)
    dref[i] = dout[i] * (0.5 * (1 + th) + 0.5 * v * (1 - th * th) * k * (1 + 3 * 0.044715 * v * v));
  }
  EXPECT_TRUE(all_close(out, ref, 1e-7, 2e-6));
  EXPECT_TRUE(all_close(dinp, dref, 1e-6, 5e-6));
}

TEST(Residual, ForwardAndAccumulatingBackward) {
  auto be = cpu_backend();
  for (size_t n : {size_t{1}, size_t{13}, size_t{70001}}) {
    auto a = randn(n, 5), b = randn(n, 6), stream = randn(n, 7), branch = randn(n, 8);
    std::vector<float> out(n);
    be->residual_forward(out.data(), a.data(), b.data(), n);
    std::vector<double> sum(n), acc(n);
    for (size_t i = 0; i < n; i++) {
      sum[i] = static_cast<double>(a[i]) + b[i];
      acc[i] = static_cast<double>(stream[i]) + branch[i];
    }
    be->residual_backward(stream.data(), branch.data(), n);
    // One correctly rounded float addition: within half an ulp.
    EXPECT_TRUE(all_close(out, sum, 0.0, 6e-8)) << n;
    EXPECT_TRUE(all_close(stream, acc, 0.0, 6e-8)) << n;
  }
}

}  // namespace
}  // namespace gpt::test
