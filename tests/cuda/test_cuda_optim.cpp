// CUDA optimizer-side ops against their CPU twins: AdamW, sum of squares, fp32 accumulation. All fp32 (no
// bf16 anywhere), so the bounds are pure fp32 rounding (derivation: top of test_cuda_ops.cpp).
#include <cmath>
#include <vector>

#include "tests/cuda/twin_util.h"

namespace gpt::test {
namespace {

TEST_F(CudaTwin, AdamWMatchesTorchFormula) {
  const size_t n = 70001;
  Rng rng(301);
  auto p0 = uniform_f32(rng, n, -1, 1), grad = uniform_f32(rng, n, -1, 1);
  auto m0 = uniform_f32(rng, n, -0.1f, 0.1f), v0 = uniform_f32(rng, n, 1e-4f, 1e-2f);
  AdamWParams hp;
  hp.lr = 1e-3f, hp.beta1 = 0.9f, hp.beta2 = 0.95f, hp.eps = 1e-8f, hp.weight_decay = 0.1f;
  hp.grad_scale = 0.7f, hp.step = 5;
  // The step constants both twins derive on the host (double, rounded to float once), as torch does.
  const double bc1 = 1.0 - std::pow(static_cast<double>(hp.beta1), hp.step);
  const double bc2 = 1.0 - std::pow(static_cast<double>(hp.beta2), hp.step);
  const double step = static_cast<float>(hp.lr / bc1), bc2s = static_cast<float>(std::sqrt(bc2));
  const double decay = static_cast<float>(1.0 - static_cast<double>(hp.lr) * hp.weight_decay);
  const double b1 = hp.beta1, b2 = hp.beta2, eps = hp.eps;
  const double c1 = 1.0f - hp.beta1, c2 = 1.0f - hp.beta2;  // exact in fp32 (Sterbenz)
  std::vector<double> rp(n), rm(n), rv(n), tp(n), tm(n), tv(n);
  for (size_t i = 0; i < n; i++) {
    const double g = static_cast<double>(grad[i]) * hp.grad_scale;
    rm[i] = b1 * m0[i] + c1 * g;
    rv[i] = b2 * v0[i] + c2 * g * g;
    tm[i] = 2 * kU * (std::fabs(b1 * m0[i]) + std::fabs(c1 * g)) + kU * std::fabs(rm[i]);
    tv[i] = kU * b2 * v0[i] + 4 * kU * c2 * g * g + kU * rv[i];
    const double sq = std::sqrt(rv[i]) / bc2s, D = sq + eps, r = rm[i] / D, upd = step * r;
    rp[i] = p0[i] * decay - upd;
    const double eD = sq * (tv[i] / (2 * rv[i]) + 2 * kU) + kU * D;
    const double er = tm[i] / D + std::fabs(r) * (eD / D + kU);
    tp[i] = kU * std::fabs(p0[i] * decay) + step * er + kU * std::fabs(upd) + kU * std::fabs(rp[i]);
  }
  std::vector<float> p[2], m[2], v[2];
  Backend* bes[2] = {gpu.get(), cpu.get()};
  for (int k = 0; k < 2; k++) {
    Backend& be = *bes[k];
    DevBuf dp = upload_f32(be, p0), dg = upload_f32(be, grad), dm = upload_f32(be, m0), dv = upload_f32(be, v0);
    be.adamw_update(dp.f32(), dg.f32(), dm.f32(), dv.f32(), n, hp);
    p[k] = download_f32(be, dp.get(), n);
    m[k] = download_f32(be, dm.get(), n);
    v[k] = download_f32(be, dv.get(), n);
  }
  expect_twins("adamw param", p[0], p[1], rp, tp, tp);
  expect_twins("adamw m", m[0], m[1], rm, tm, tm);
  expect_twins("adamw v", v[0], v[1], rv, tv, tv);
}

TEST_F(CudaTwin, SumSquaresInDouble) {
  const size_t n = 100003;
  Rng rng(302);
  auto x = uniform_f32(rng, n, -2, 2);
  long double ref = 0;  // 64-bit significand: the reference's own error is ~n 2^-64, negligible
  for (float xi : x) ref += static_cast<long double>(xi) * xi;
  // Squares of floats are exact in double; an n-term double sum in any order errs by <= 2 n 2^-53 of the sum.
  const double tol = 2.0 * n * std::ldexp(1.0, -53) * static_cast<double>(ref);
  double got[2];
  Backend* bes[2] = {gpu.get(), cpu.get()};
  for (int k = 0; k < 2; k++) {
    DevBuf d = upload_f32(*bes[k], x);
    got[k] = bes[k]->sum_squares(d.f32(), n);
  }
  EXPECT_NEAR(got[0], static_cast<double>(ref), tol) << "cuda sum_squares";
  EXPECT_NEAR(got[1], static_cast<double>(ref), tol) << "cpu sum_squares";
  EXPECT_NEAR(got[0], got[1], 2 * tol) << "cuda vs cpu sum_squares";
}

// y + x is one correctly rounded fp32 addition on any IEEE machine: the twins agree bit for bit. The size
// passes the cap of the elementwise launch grid (65536 blocks of 256), so the grid-stride loop is exercised.
TEST_F(CudaTwin, AccumulateF32IsExact) {
  const size_t n = (size_t{1} << 24) + 4099;
  Rng rng(303);
  auto y0 = uniform_f32(rng, n, -1, 1), x = uniform_f32(rng, n, -1, 1);
  std::vector<double> ref(n), zero(n, 0.0);
  for (size_t i = 0; i < n; i++) ref[i] = static_cast<float>(y0[i] + x[i]);
  std::vector<float> got[2];
  Backend* bes[2] = {gpu.get(), cpu.get()};
  for (int k = 0; k < 2; k++) {
    DevBuf dy = upload_f32(*bes[k], y0), dx = upload_f32(*bes[k], x);
    bes[k]->accumulate_f32(dy.f32(), dx.f32(), n);
    got[k] = download_f32(*bes[k], dy.get(), n);
  }
  expect_twins("accumulate_f32", got[0], got[1], ref, zero, zero);
}

}  // namespace
}  // namespace gpt::test
