// LayerNorm against a naive double loop (outputs, mean, rstd) and its backward against finite differences
// for dinp, dw and db, including the += contract of dw/db and rows with a large common offset; the fused
// ops (residual add + layernorm, layernorm backward into the residual gradient) against the same references
// and bit for bit against the op pairs they replace.
#include "tests/ops/op_test_util.h"

namespace gpt::test {
namespace {

struct LnRef {
  std::vector<double> out, mean, rstd;
};

LnRef layernorm_ref(const std::vector<double>& x, const std::vector<double>& w, const std::vector<double>& b, int N,
                    int C) {
  LnRef r{std::vector<double>(x.size()), std::vector<double>(N), std::vector<double>(N)};
  for (int i = 0; i < N; i++) {
    double m = 0, v = 0;
    for (int c = 0; c < C; c++) m += x[i * C + c];
    m /= C;
    for (int c = 0; c < C; c++) v += (x[i * C + c] - m) * (x[i * C + c] - m);
    v /= C;  // biased variance
    double s = 1.0 / std::sqrt(v + 1e-5);
    for (int c = 0; c < C; c++) r.out[i * C + c] = (x[i * C + c] - m) * s * w[c] + b[c];
    r.mean[i] = m;
    r.rstd[i] = s;
  }
  return r;
}

void check_forward(int N, int C, double shift, uint64_t seed) {
  auto be = cpu_backend();
  auto x = randn(N * C, seed, 1.0, shift), w = randn(C, seed + 1), b = randn(C, seed + 2);
  std::vector<float> out(N * C), mean(N), rstd(N);
  be->layernorm_forward(out.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(), N, C);
  auto ref = layernorm_ref(to_double(x), to_double(w), to_double(b), N, C);
  // Float mean/variance of C <= 800 terms with O(1) deviations: relative error ~ C * 6e-8 worst case.
  // With a shift s the inputs themselves carry s * 6e-8 absolute rounding, amplified by rstd ~ 1.
  double tol = 1e-5 + 1e-7 * shift;
  EXPECT_TRUE(all_close(out, ref.out, 4 * tol, 1e-5)) << "N=" << N << " C=" << C;
  EXPECT_TRUE(all_close(mean, ref.mean, tol, 1e-6));
  EXPECT_TRUE(all_close(rstd, ref.rstd, 0.0, 1e-5));
}

TEST(LayerNorm, ForwardMatchesNaiveLoop) {
  check_forward(5, 13, 0.0, 10);
  check_forward(1, 7, 0.0, 20);
  check_forward(67, 771, 0.5, 30);   // several 64-row chunks, odd width
  check_forward(9, 64, 100.0, 40);   // large common offset: two-pass statistics keep precision
}

void check_backward(int N, int C, uint64_t seed) {
  auto be = cpu_backend();
  auto x = randn(N * C, seed, 1.5, 0.3), w = randn(C, seed + 1), b = randn(C, seed + 2);
  auto dout = randn(N * C, seed + 3);
  std::vector<float> out(N * C), mean(N), rstd(N);
  be->layernorm_forward(out.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(), N, C);

  auto xd = to_double(x), wd = to_double(w), bd = to_double(b), dd = to_double(dout);
  auto L = [&]() { return dot(dd, layernorm_ref(xd, wd, bd, N, C).out); };
  auto gx = fd_gradient(L, xd), gw = fd_gradient(L, wd), gb = fd_gradient(L, bd);

  std::vector<float> dinp(N * C, 123.0f);  // garbage: backward must overwrite
  auto dw = randn(C, seed + 4), db = randn(C, seed + 5);  // pre-filled: backward must add
  for (int c = 0; c < C; c++) {
    gw[c] += dw[c];
    gb[c] += db[c];
  }
  be->layernorm_backward(dinp.data(), dw.data(), db.data(), dout.data(), x.data(), w.data(), mean.data(),
                         rstd.data(), N, C);
  // dinp: a handful of float ops on O(1) values per element plus two row means of C terms -> ~1e-6
  // absolute; dw/db: float sums over N rows of O(1) terms -> ~N * 6e-8 relative.
  EXPECT_TRUE(all_close(dinp, gx, 2e-5, 1e-4)) << "N=" << N << " C=" << C;
  EXPECT_TRUE(all_close(dw, gw, 2e-5, 1e-4));
  EXPECT_TRUE(all_close(db, gb, 2e-5, 1e-4));
}

TEST(LayerNorm, BackwardMatchesFiniteDifferences) {
  check_backward(5, 13, 50);
  check_backward(1, 9, 60);
  check_backward(70, 6, 70);  // crosses the 64-row partial-sum chunks
}

// ---- the fused ops: residual + layernorm forward, layernorm backward into the residual gradient ----------

// residual_layernorm_forward: res against the exact sums, out/mean/rstd against the naive double loop on
// those sums, and every output bit-identical to residual_forward then layernorm_forward.
void check_residual_forward(int N, int C, uint64_t seed) {
  auto be = cpu_backend();
  auto a = randn(N * C, seed, 1.2, 0.2), b = randn(N * C, seed + 1), w = randn(C, seed + 2), bias = randn(C, seed + 3);
  std::vector<float> res(N * C, -7.0f), out(N * C, -7.0f), mean(N, -7.0f), rstd(N, -7.0f);
  be->residual_layernorm_forward(res.data(), out.data(), mean.data(), rstd.data(), a.data(), b.data(), w.data(),
                                 bias.data(), N, C);
  std::vector<double> sum(N * C);
  for (int i = 0; i < N * C; i++) sum[i] = static_cast<double>(a[i]) + b[i];
  EXPECT_TRUE(all_close(res, sum, 0.0, 6e-8)) << "one correctly rounded addition";
  auto ref = layernorm_ref(to_double(res), to_double(w), to_double(bias), N, C);
  EXPECT_TRUE(all_close(out, ref.out, 4e-5, 1e-5)) << "N=" << N << " C=" << C;  // as check_forward
  EXPECT_TRUE(all_close(mean, ref.mean, 1e-5, 1e-6));
  EXPECT_TRUE(all_close(rstd, ref.rstd, 0.0, 1e-5));

  std::vector<float> res2(N * C), out2(N * C), mean2(N), rstd2(N);
  be->residual_forward(res2.data(), a.data(), b.data(), static_cast<size_t>(N) * C);
  be->layernorm_forward(out2.data(), mean2.data(), rstd2.data(), res2.data(), w.data(), bias.data(), N, C);
  EXPECT_EQ(res, res2);
  EXPECT_EQ(out, out2) << "the fused forward must equal the pair bit for bit";
  EXPECT_EQ(mean, mean2);
  EXPECT_EQ(rstd, rstd2);
}

TEST(LayerNorm, ResidualForwardMatchesNaiveLoopAndThePair) {
  check_residual_forward(5, 13, 80);
  check_residual_forward(67, 771, 90);  // several row chunks, odd width
  check_residual_forward(130, 64, 100);
}

// layernorm_backward_residual: dres += the finite-difference input gradient; dw, db as layernorm_backward;
// and every output bit-identical to layernorm_backward then residual_backward.
void check_backward_residual(int N, int C, uint64_t seed) {
  auto be = cpu_backend();
  auto x = randn(N * C, seed, 1.5, 0.3), w = randn(C, seed + 1), b = randn(C, seed + 2);
  auto dout = randn(N * C, seed + 3), dres0 = randn(N * C, seed + 6);
  std::vector<float> out(N * C), mean(N), rstd(N);
  be->layernorm_forward(out.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(), N, C);

  auto xd = to_double(x), wd = to_double(w), bd = to_double(b), dd = to_double(dout);
  auto L = [&]() { return dot(dd, layernorm_ref(xd, wd, bd, N, C).out); };
  auto gx = fd_gradient(L, xd), gw = fd_gradient(L, wd), gb = fd_gradient(L, bd);
  auto dw = randn(C, seed + 4), db = randn(C, seed + 5);
  for (int i = 0; i < N * C; i++) gx[i] += dres0[i];
  for (int c = 0; c < C; c++) gw[c] += dw[c], gb[c] += db[c];

  auto dres = dres0, dw1 = dw, db1 = db;
  be->layernorm_backward_residual(dres.data(), dw1.data(), db1.data(), dout.data(), x.data(), w.data(), mean.data(),
                                  rstd.data(), N, C);
  EXPECT_TRUE(all_close(dres, gx, 2e-5, 1e-4)) << "N=" << N << " C=" << C;  // the bounds of check_backward
  EXPECT_TRUE(all_close(dw1, gw, 2e-5, 1e-4));
  EXPECT_TRUE(all_close(db1, gb, 2e-5, 1e-4));

  std::vector<float> dinp(N * C);
  auto dres2 = dres0, dw2 = dw, db2 = db;
  be->layernorm_backward(dinp.data(), dw2.data(), db2.data(), dout.data(), x.data(), w.data(), mean.data(),
                         rstd.data(), N, C);
  be->residual_backward(dres2.data(), dinp.data(), static_cast<size_t>(N) * C);
  EXPECT_EQ(dres, dres2) << "the fused backward must equal the pair bit for bit";
  EXPECT_EQ(dw1, dw2);
  EXPECT_EQ(db1, db2);
}

TEST(LayerNorm, BackwardResidualMatchesFiniteDifferencesAndThePair) {
  check_backward_residual(5, 13, 110);
  check_backward_residual(70, 6, 120);  // crosses the 64-row partial-sum chunks
  check_backward_residual(3, 37, 130);
}

}  // namespace
}  // namespace gpt::test
