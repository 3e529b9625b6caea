// AdamW against a closed-form double computation of several steps (weight decay, grad_scale and bias
// correction all active) and with a compute-copy output, plus sum_squares, sum_squares_all and
// accumulate_f32 against double loops, and the thread-count independence of every reduction that feeds a
// parameter gradient or the gradient norm.
#include <cmath>
#include <cstring>

#include "tests/ops/op_test_util.h"
#ifdef _OPENMP
#include <omp.h>
#endif

namespace gpt::test {
namespace {

TEST(AdamW, MatchesClosedFormOverSeveralSteps) {
  auto be = cpu_backend();
  size_t n = 40001;  // above the parallel threshold, odd
  auto p = randn(n, 1), m = std::vector<float>(n, 0.0f), v = std::vector<float>(n, 0.0f);
  std::vector<double> pd = to_double(p), md(n, 0.0), vd(n, 0.0);
  AdamWParams hp;
  hp.lr = 1e-2f;
  hp.beta1 = 0.9f;
  hp.beta2 = 0.95f;
  hp.eps = 1e-6f;
  hp.weight_decay = 0.1f;
  hp.grad_scale = 0.5f;
  for (int step = 1; step <= 4; step++) {
    auto g = randn(n, 100 + step, step == 3 ? 1e-4 : 1.0);  // one step with tiny grads: eps matters
    hp.step = step;
    be->adamw_update(p.data(), g.data(), m.data(), v.data(), nullptr, n, hp);
    double b1 = hp.beta1, b2 = hp.beta2;
    for (size_t i = 0; i < n; i++) {
      double gs = g[i] * static_cast<double>(hp.grad_scale);
      md[i] = b1 * md[i] + (1 - b1) * gs;
      vd[i] = b2 * vd[i] + (1 - b2) * gs * gs;
      double mhat = md[i] / (1 - std::pow(b1, step)), vhat = vd[i] / (1 - std::pow(b2, step));
      pd[i] -= static_cast<double>(hp.lr) * (mhat / (std::sqrt(vhat) + hp.eps) + hp.weight_decay * pd[i]);
    }
    // Each step moves p by <= lr (~1e-2) with a few float ops: the float path drifts from the double one
    // by ~1e-7 absolute per step. m = b1 m + (1-b1) g may cancel, so its error is relative to the terms
    // (|g| * grad_scale <~ 2, so ~1e-8 absolute); v adds positive terms (relative ~1e-7).
    ASSERT_TRUE(all_close(p, pd, 1e-6, 1e-6)) << "step " << step;
    ASSERT_TRUE(all_close(m, md, 3e-8, 1e-6)) << "step " << step;
    ASSERT_TRUE(all_close(v, vd, 1e-15, 1e-6)) << "step " << step;
  }
}

TEST(AdamW, StepZeroIsAnError) {
  auto be = cpu_backend();
  float p = 1, g = 1, m = 0, v = 0;
  AdamWParams hp;
  hp.step = 0;
  EXPECT_THROW(be->adamw_update(&p, &g, &m, &v, nullptr, 1, hp), gpt::Error);
}

// The cpu twin of the compute copy (Backend::adamw_update's param_out): with an output the update is the same
// update, bit for bit (param, m, v), and the output holds the updated fp32 params (the cpu's compute dtype).
// Sizes on both sides of the parallel threshold.
TEST(AdamW, ComputeCopyOutputIsTheUpdatedParam) {
  auto be = cpu_backend();
  AdamWParams hp;
  hp.lr = 1e-2f;
  hp.weight_decay = 0.1f;
  hp.grad_scale = 0.5f;
  for (size_t n : {size_t{1}, size_t{1001}, size_t{40001}}) {
    const auto p0 = randn(n, 11), g = randn(n, 12), m0 = randn(n, 13, 0.1);
    std::vector<float> v0 = randn(n, 14, 0.01);
    for (float& x : v0) x = x * x;
    std::vector<float> p[2] = {p0, p0}, m[2] = {m0, m0}, v[2] = {v0, v0}, out(n, -7.0f);
    for (int step = 1; step <= 3; step++) {
      hp.step = step;
      be->adamw_update(p[0].data(), g.data(), m[0].data(), v[0].data(), nullptr, n, hp);
      be->adamw_update(p[1].data(), g.data(), m[1].data(), v[1].data(), out.data(), n, hp);
      EXPECT_EQ(std::memcmp(p[0].data(), p[1].data(), n * 4), 0) << n << " step " << step;
      EXPECT_EQ(std::memcmp(m[0].data(), m[1].data(), n * 4), 0) << n << " step " << step;
      EXPECT_EQ(std::memcmp(v[0].data(), v[1].data(), n * 4), 0) << n << " step " << step;
      EXPECT_EQ(std::memcmp(out.data(), p[1].data(), n * 4), 0) << n << " step " << step;
    }
  }
}

// sum_squares_all (cpu::sum_squares_all, on the cpu backend and the host side of a device; the Backend
// default, which backends without an op of their own keep, is checked through the engine in
// tests/fsdp/test_compute_copy.cpp) is the loop of sum_squares added in index order from 0, bit for bit, so
// the engine's gradient norm does not change; and it is the sum of squares, against a long double sum (exact
// squares; only the double additions round). Buffers of assorted lengths, the empty one and those past the
// parallel threshold included.
TEST(SumSquaresAll, IsTheLoopBitForBitAndTheSum) {
  auto be = cpu_backend();
  auto host = make_host_backend(*be);
  const std::vector<size_t> ns = {57344, 0, 198272, 1, 198272, 17, 256, 100003};
  std::vector<std::vector<float>> bufs;
  std::vector<const float*> xs;
  long double ref = 0;
  size_t total = 0;
  for (size_t i = 0; i < ns.size(); i++) bufs.push_back(randn(ns[i], 40 + (int)i, 1e-3 * (double)(i + 1)));
  for (const auto& b : bufs) {
    xs.push_back(b.data());
    for (float f : b) ref += static_cast<long double>(f) * f;
    total += b.size();
  }
  const double tol = 2.0 * (double)total * std::ldexp(1.0, -53) * (double)ref;  // |terms| sum to the sum
  for (Backend* b : {be.get(), host.get()}) {
    double loop = 0;
    for (size_t i = 0; i < ns.size(); i++) loop += b->sum_squares(xs[i], ns[i]);
    const double all = b->sum_squares_all(xs.data(), ns.data(), (int)ns.size());
    EXPECT_EQ(std::memcmp(&all, &loop, sizeof(double)), 0) << b->name() << ": " << all << " vs " << loop;
    EXPECT_NEAR(all, (double)ref, tol) << b->name();
    EXPECT_EQ(b->sum_squares_all(xs.data(), ns.data(), 0), 0.0);
    const double one = b->sum_squares_all(xs.data(), ns.data(), 1);
    const double single = b->sum_squares(xs[0], ns[0]);
    EXPECT_EQ(std::memcmp(&one, &single, sizeof(double)), 0) << b->name();
  }
}

TEST(SumSquares, MatchesDoubleLoop) {
  auto be = cpu_backend();
  for (size_t n : {size_t{0}, size_t{1}, size_t{17}, size_t{200003}}) {
    auto x = randn(n, 7, 3.0);
    double expect = 0;
    for (float f : x) expect += static_cast<double>(f) * f;
    // Squares of floats are exact in double; only the double summation order differs (~n * 1e-16).
    EXPECT_NEAR(be->sum_squares(x.data(), n), expect, 1e-12 * expect + 1e-300) << n;
  }
}

TEST(AccumulateF32, AddsInPlace) {
  auto be = cpu_backend();
  for (size_t n : {size_t{1}, size_t{31}, size_t{50001}}) {
    auto y = randn(n, 8), x = randn(n, 9);
    std::vector<double> expect(n);
    for (size_t i = 0; i < n; i++) expect[i] = static_cast<double>(y[i]) + x[i];
    be->accumulate_f32(y.data(), x.data(), n, 1);
    EXPECT_TRUE(all_close(y, expect, 0.0, 6e-8)) << n;  // one correctly rounded addition
  }
}

// y + x / 3: a correctly rounded fp32 division, then a correctly rounded addition. Each computed in double and
// rounded to float gives the same bits (double's 53 bits are at least 2 x 24 + 2, so rounding twice is
// innocuous for + and /), which makes an exact reference.
TEST(AccumulateF32, AddsTheMeanOfASumOverRanks) {
  auto be = cpu_backend();
  for (size_t n : {size_t{1}, size_t{31}, size_t{50001}}) {
    auto y = randn(n, 10), x = randn(n, 11, 3.0);
    std::vector<float> expect(n);
    for (size_t i = 0; i < n; i++) {
      const float q = static_cast<float>(static_cast<double>(x[i]) / 3.0);
      expect[i] = static_cast<float>(static_cast<double>(y[i]) + q);
    }
    be->accumulate_f32(y.data(), x.data(), n, 3);
    EXPECT_EQ(y, expect) << n;
  }
}

#ifdef _OPENMP
// Runs fn with 1 thread and with 3 threads; the reductions must give bit-identical results.
template <typename Fn>
void expect_thread_count_free(Fn fn) {
  int keep = omp_get_max_threads();
  omp_set_num_threads(1);
  auto one = fn();
  omp_set_num_threads(3);
  auto three = fn();
  omp_set_num_threads(keep);
  EXPECT_EQ(one, three);
}

TEST(Reductions, IndependentOfThreadCount) {
  auto be = cpu_backend();
  int N = 200, C = 300;
  auto a = randn(N * C, 11), b = randn(N * C, 12), w = randn(C, 13);
  std::vector<int> tokens(N);
  for (int i = 0; i < N; i++) tokens[i] = i % 7;
  expect_thread_count_free([&] { return be->sum_squares(a.data(), a.size()); });
  expect_thread_count_free([&] {  // layernorm dw, db
    std::vector<float> out(N * C), mean(N), rstd(N), dinp(N * C), dw(C, 0.0f), db(C, 0.0f);
    be->layernorm_forward(out.data(), mean.data(), rstd.data(), a.data(), w.data(), w.data(), N, C);
    be->layernorm_backward(dinp.data(), dw.data(), db.data(), b.data(), a.data(), w.data(), mean.data(),
                           rstd.data(), N, C);
    dw.insert(dw.end(), db.begin(), db.end());
    return dw;
  });
  expect_thread_count_free([&] {  // matmul dbias
    std::vector<float> dw(C * 2, 0.0f), dbias(C, 0.0f);
    be->matmul_backward(nullptr, dw.data(), dbias.data(), b.data(), a.data(), a.data(), N, 2, C);
    return dbias;
  });
  expect_thread_count_free([&] {  // encoder dwte, dwpe
    std::vector<float> dwte(7 * C, 0.0f), dwpe(N * C, 0.0f);
    be->encoder_backward(dwte.data(), dwpe.data(), b.data(), tokens.data(), 1, N, C);
    return dwte;
  });
}
#endif

}  // namespace
}  // namespace gpt::test
