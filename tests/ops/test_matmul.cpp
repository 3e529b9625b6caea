// Matmul (out = inp @ w^T + bias) against a naive double loop, and its backward against finite
// differences: odd sizes, N = 1, no bias, no input gradient, and the += contract of dw and dbias; the
// backward through a GELU (gelu_matmul_backward) against finite differences and the op pair it replaces.
#include "tests/ops/op_test_util.h"

namespace gpt::test {
namespace {

std::vector<double> matmul_ref(const std::vector<double>& x, const std::vector<double>& w,
                               const std::vector<double>* bias, int N, int C, int OC) {
  std::vector<double> out(static_cast<size_t>(N) * OC);
  for (int i = 0; i < N; i++)
    for (int o = 0; o < OC; o++) {
      double s = bias ? (*bias)[o] : 0.0;
      for (int c = 0; c < C; c++) s += x[i * C + c] * w[o * C + c];
      out[i * OC + o] = s;
    }
  return out;
}

// Float dot products of C terms ~N(0,1)^2: rounding ~ sqrt(C) * 6e-8 * |terms|, well under 1e-5 for C < 1000.
constexpr double kAtol = 2e-5, kRtol = 1e-5;

void check_forward(int N, int C, int OC, bool with_bias, uint64_t seed) {
  auto be = cpu_backend();
  auto x = randn(N * C, seed), w = randn(OC * C, seed + 1), bias = randn(OC, seed + 2);
  std::vector<float> out(N * OC, 7.0f);
  be->matmul_forward(out.data(), x.data(), w.data(), with_bias ? bias.data() : nullptr, N, C, OC);
  auto bd = to_double(bias);
  auto ref = matmul_ref(to_double(x), to_double(w), with_bias ? &bd : nullptr, N, C, OC);
  EXPECT_TRUE(all_close(out, ref, kAtol * std::sqrt(C), kRtol)) << N << "x" << C << "x" << OC;
}

TEST(Matmul, ForwardMatchesNaiveLoop) {
  check_forward(5, 7, 9, true, 1);
  check_forward(5, 7, 9, false, 2);
  check_forward(1, 13, 3, true, 3);
  check_forward(37, 70, 300, true, 4);
}

// matmul_gelu_forward: pre as matmul_forward, out = tanh-form GELU of pre (double reference; GELU's
// slope is at most 1.13 and the float evaluation adds a few ulps).
TEST(Matmul, GeluForwardMatchesNaiveLoop) {
  auto be = cpu_backend();
  const int N = 9, C = 70, OC = 33;
  auto x = randn(N * C, 11), w = randn(OC * C, 12), bias = randn(OC, 13);
  std::vector<float> pre(N * OC, 7.0f), out(N * OC, 7.0f);
  be->matmul_gelu_forward(out.data(), pre.data(), x.data(), w.data(), bias.data(), N, C, OC);
  auto bd = to_double(bias);
  const auto ref = matmul_ref(to_double(x), to_double(w), &bd, N, C, OC);
  std::vector<double> gelu(ref.size());
  for (size_t i = 0; i < ref.size(); i++) {
    const double v = ref[i];
    gelu[i] = 0.5 * v * (1 + std::tanh(0.7978845608028654 * (v + 0.044715 * v * v * v)));
  }
  EXPECT_TRUE(all_close(pre, ref, kAtol * std::sqrt(C), kRtol));
  EXPECT_TRUE(all_close(out, gelu, 1.13 * kAtol * std::sqrt(C) + 1e-6, kRtol + 1e-6));
}

struct BackwardCase {
  int N, C, OC;
  bool bias, want_dinp;
  size_t samples;  // 0 = every element; otherwise this many sampled indices per tensor
};

void check_backward(const BackwardCase& k, uint64_t seed) {
  auto be = cpu_backend();
  int N = k.N, C = k.C, OC = k.OC;
  auto x = randn(N * C, seed), w = randn(OC * C, seed + 1), bias = randn(OC, seed + 2);
  auto dout = randn(N * OC, seed + 3);
  auto xd = to_double(x), wd = to_double(w), bd = to_double(bias), dd = to_double(dout);
  auto L = [&]() { return dot(dd, matmul_ref(xd, wd, k.bias ? &bd : nullptr, N, C, OC)); };

  std::vector<float> dinp(N * C, -5.0f);  // garbage: must be overwritten
  auto dw = randn(OC * C, seed + 4), dbias = randn(OC, seed + 5);  // pre-filled: must be added to
  auto dw0 = dw, dbias0 = dbias;
  be->matmul_backward(k.want_dinp ? dinp.data() : nullptr, dw.data(), k.bias ? dbias.data() : nullptr,
                      dout.data(), x.data(), w.data(), N, C, OC);

  // Gradients are float sums of N (dw, dbias) or OC (dinp) products of O(1) values.
  double atol = 2e-5 * std::sqrt(std::max(N, OC)), rtol = 1e-5;
  Rng pick(seed);
  auto check = [&](std::vector<double>& param, const std::vector<float>& got, const std::vector<float>& base,
                   const char* what) {
    size_t n = k.samples ? k.samples : param.size();
    for (size_t s = 0; s < n; s++) {
      size_t i = k.samples ? pick.next_u64() % param.size() : s;
      double expect = central_diff(L, param, i) + (base.empty() ? 0.0 : base[i]);
      ASSERT_NEAR(got[i], expect, atol + rtol * std::fabs(expect)) << what << "[" << i << "]";
    }
  };
  if (k.want_dinp) check(xd, dinp, {}, "dinp");
  else EXPECT_EQ(dinp[0], -5.0f);
  check(wd, dw, dw0, "dw");
  if (k.bias) check(bd, dbias, dbias0, "dbias");
  else EXPECT_EQ(dbias, dbias0);  // untouched when there is no bias
}

TEST(Matmul, BackwardMatchesFiniteDifferences) {
  check_backward({5, 7, 9, true, true, 0}, 10);
  check_backward({1, 7, 5, true, true, 0}, 20);     // N = 1
  check_backward({6, 11, 4, false, true, 0}, 30);   // no bias
  check_backward({4, 9, 10, true, false, 0}, 40);   // no input gradient
  check_backward({37, 70, 300, true, true, 60}, 50);  // several dbias column blocks, sampled
}

TEST(Matmul, DbiasIsExactColumnSumOverManyRows) {
  // Many rows and a width that leaves a partial column block: dbias += column sums (double reference).
  int N = 300, OC = 531;
  auto be = cpu_backend();
  auto dout = randn(N * OC, 60), x = randn(N * 3, 61), w = randn(OC * 3, 62);
  std::vector<float> dw(OC * 3, 0.0f), dbias(OC, 1.0f);
  be->matmul_backward(nullptr, dw.data(), dbias.data(), dout.data(), x.data(), w.data(), N, 3, OC);
  std::vector<double> expect(OC, 1.0);
  for (int i = 0; i < N; i++)
    for (int o = 0; o < OC; o++) expect[o] += dout[i * OC + o];
  // float sum of 300 N(0,1) terms: ~sqrt(300) * 17 * 6e-8 rounding, below 1e-5.
  EXPECT_TRUE(all_close(dbias, expect, 2e-5, 1e-6));
}

// gelu_matmul_backward: the backward of out = gelu(pre) @ w^T + bias through the GELU. dpre against finite
// differences of L(pre) = sum(dout * (gelu(pre) @ w^T + bias)), dw and dbias against the naive sums with
// inp = gelu(pre) (sampled), and every output bit-identical to matmul_backward then gelu_backward.
TEST(Matmul, GeluMatmulBackwardMatchesFiniteDifferencesAndThePair) {
  auto be = cpu_backend();
  const int N = 7, C = 29, OC = 11;
  auto pre = randn(N * C, 70, 2.0), w = randn(OC * C, 71), bias = randn(OC, 72), dout = randn(N * OC, 73);
  std::vector<float> inp(N * C);
  be->gelu_forward(inp.data(), pre.data(), inp.size());
  auto gelu_d = [](double v) { return 0.5 * v * (1 + std::tanh(0.7978845608028654 * (v + 0.044715 * v * v * v))); };
  auto pd = to_double(pre), wd = to_double(w), bd = to_double(bias), dd = to_double(dout);
  auto L = [&]() {
    std::vector<double> g(pd.size());
    for (size_t i = 0; i < g.size(); i++) g[i] = gelu_d(pd[i]);
    return dot(dd, matmul_ref(g, wd, &bd, N, C, OC));
  };
  auto gpre = fd_gradient(L, pd);

  std::vector<float> dpre(N * C, -5.0f);
  auto dw = randn(OC * C, 74), db = randn(OC, 75);
  auto dw2 = dw, db2 = db;
  be->gelu_matmul_backward(dpre.data(), dw.data(), db.data(), dout.data(), inp.data(), pre.data(), w.data(), N, C, OC);
  // dpre: a float sum of OC products times gelu' (a few ulps): the matmul bound of check_backward.
  EXPECT_TRUE(all_close(dpre, gpre, 2e-5 * std::sqrt(OC), 1e-5));

  std::vector<float> dinp(N * C), dpre2(N * C);
  be->matmul_backward(dinp.data(), dw2.data(), db2.data(), dout.data(), inp.data(), w.data(), N, C, OC);
  be->gelu_backward(dpre2.data(), pre.data(), dinp.data(), dinp.size());
  EXPECT_EQ(dpre, dpre2) << "the fused backward must equal the pair bit for bit";
  EXPECT_EQ(dw, dw2);
  EXPECT_EQ(db, db2);
}

}  // namespace
}  // namespace gpt::test
