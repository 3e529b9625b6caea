// LayerNorm against a naive double loop (outputs, mean, rstd) and its backward against finite differences
// for dinp, dw and db, including the += contract of dw/db and rows with a large common offset.
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

}  // namespace
}  // namespace gpt::test
