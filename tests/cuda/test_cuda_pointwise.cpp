// CUDA ops against their CPU twins: GELU, residual, classifier. Tolerances follow the derivation at the top
// of test_cuda_ops.cpp (u = 2^-24, ub = 2^-8, acc(K) for K-term sums, bf16_out for one bf16 rounding). The
// element-wise ops also run their one-element path (an unaligned buffer) and must equal the vector path bit
// for bit; the classifier runs its register-cached path, its one-element path and a row longer than the cache.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "tests/cuda/twin_util.h"

namespace gpt::test {
namespace {

TEST_F(CudaTwin, GeluForward) {
  const size_t n = 5003;
  Rng rng(201);
  auto x = uniform_bf16(rng, n, -6, 6);
  std::vector<double> ref(n), tc(n), tg(n);
  for (size_t i = 0; i < n; i++) {
    const double xi = x[i];
    ref[i] = 0.5 * xi * (1 + std::tanh(kS2Pi * (xi + kCubic * xi * xi * xi)));  // the tanh form, independently
    tc[i] = std::fabs(xi) * GeluBound(xi).ds + kU * std::fabs(ref[i]);
    tg[i] = bf16_out(ref[i], tc[i]);
  }
  auto run = [&](Backend& be, size_t offset) {
    OffsetBuf dx = upload_compute_at(be, x, offset);
    DevBuf out = poisoned_compute(be, n);
    be.gelu_forward(out.get(), dx.get(), n);
    return download_compute(be, out.get(), n);
  };
  const std::vector<float> vec = run(*gpu, 0);  // 16-byte vectors and a tail of n % 8 = 3
  expect_twins("gelu_forward", vec, run(*cpu, 0), ref, tg, tc);
  EXPECT_EQ(run(*gpu, 1), vec) << "the one-element path (unaligned input) must equal the vector path";
}

TEST_F(CudaTwin, GeluBackward) {
  const size_t n = 5003;
  Rng rng(202);
  auto x = uniform_bf16(rng, n, -6, 6);
  auto dout = uniform_bf16(rng, n, -1, 1);
  std::vector<double> ref(n), tc(n), tg(n);
  for (size_t i = 0; i < n; i++) {
    const double xi = x[i];
    const double t = std::tanh(kS2Pi * (xi + kCubic * xi * xi * xi));
    const double dudx = kS2Pi * (1 + 3 * kCubic * xi * xi);
    const double grad = 0.5 * (1 + t) + 0.5 * xi * (1 - t * t) * dudx;  // d/dx of the tanh form
    ref[i] = dout[i] * grad;
    // grad = s + T2, T2 = 2 x s (1 - s) du/dx: s(1 - s) moves by <= ds + 2u s, du/dx and the products 6u.
    const GeluBound g(xi);
    const double t2 = 2 * xi * g.s * (1 - g.s) * dudx;
    const double e_t2 = 2 * std::fabs(xi) * dudx * (g.ds + 2 * kU * g.s) + 6 * kU * std::fabs(t2);
    const double e_grad = g.ds + e_t2 + kU * (g.s + std::fabs(t2));
    tc[i] = std::fabs(dout[i]) * e_grad + kU * std::fabs(ref[i]);
    tg[i] = bf16_out(ref[i], tc[i]);
  }
  auto run = [&](Backend& be) {
    DevBuf dx = upload_compute(be, x), dd = upload_compute(be, dout), o = poisoned_compute(be, n);
    be.gelu_backward(o.get(), dx.get(), dd.get(), n);
    return download_compute(be, o.get(), n);
  };
  auto run_in_place = [&](Backend& be) {  // dinp = dout, as gelu_matmul_backward's fallback runs it
    DevBuf dx = upload_compute(be, x), dd = upload_compute(be, dout);
    be.gelu_backward(dd.get(), dx.get(), dd.get(), n);
    return download_compute(be, dd.get(), n);
  };
  const std::vector<float> g = run(*gpu);
  expect_twins("gelu_backward", g, run(*cpu), ref, tg, tc);
  EXPECT_EQ(run_in_place(*gpu), g) << "gelu_backward in place must equal the out-of-place result";
  EXPECT_EQ(run_in_place(*cpu), run(*cpu));
}

// One fp32 addition of two bf16 numbers; the GPU rounds the sum to bf16.
void sum_bounds(const std::vector<float>& a, const std::vector<float>& b, std::vector<double>& ref,
                std::vector<double>& tc, std::vector<double>& tg) {
  ref.resize(a.size()), tc.resize(a.size()), tg.resize(a.size());
  for (size_t i = 0; i < a.size(); i++) {
    ref[i] = static_cast<double>(a[i]) + b[i];
    tc[i] = kU * std::fabs(ref[i]);
    tg[i] = bf16_out(ref[i], tc[i]);
  }
}

TEST_F(CudaTwin, ResidualForward) {
  const size_t n = 4099;
  Rng rng(203);
  auto a = uniform_bf16(rng, n, -3, 3), b = uniform_bf16(rng, n, -3, 3);
  std::vector<double> ref, tc, tg;
  sum_bounds(a, b, ref, tc, tg);
  auto run = [&](Backend& be, size_t offset) {
    DevBuf da = upload_compute(be, a), o = poisoned_compute(be, n);
    OffsetBuf db = upload_compute_at(be, b, offset);
    be.residual_forward(o.get(), da.get(), db.get(), n);
    return download_compute(be, o.get(), n);
  };
  const std::vector<float> vec = run(*gpu, 0);
  expect_twins("residual_forward", vec, run(*cpu, 0), ref, tg, tc);
  EXPECT_EQ(run(*gpu, 3), vec) << "the one-element path (unaligned b) must equal the vector path";
}

TEST_F(CudaTwin, ResidualBackwardAccumulates) {
  const size_t n = 4099;
  Rng rng(204);
  auto stream0 = uniform_bf16(rng, n, -3, 3), branch = uniform_bf16(rng, n, -3, 3);
  std::vector<double> ref, tc, tg;
  sum_bounds(stream0, branch, ref, tc, tg);
  auto run = [&](Backend& be) {
    DevBuf ds = upload_compute(be, stream0), db = upload_compute(be, branch);
    be.residual_backward(ds.get(), db.get(), n);
    return download_compute(be, ds.get(), n);
  };
  expect_twins("residual_backward", run(*gpu), run(*cpu), ref, tg, tc);
}

// ---- classifier -------------------------------------------------------------------------------------------
// The reference and its bounds: ClassifierCase (twin_util.h).
// Vp % 8 == 0 takes the register-cached vector path; Vp = 1001 the one-element path; V = 50257, Vp = 50304 is
// GPT-2's vocabulary, which nearly fills the register cache (6288 of its 7 x 1024 vectors); V = 60000 a row
// longer than the cache (7 x 1024 x 8 = 57344 columns), whose remainder is re-read.
const int kClassifierShapes[][3] = {{13, 997, 1024}, {13, 997, 1001}, {5, 50257, 50304}, {3, 60000, 60032}};

TEST_F(CudaTwin, ClassifierForward) {
  uint64_t seed = 205;
  for (const auto& sh : kClassifierShapes) {
    ClassifierCase cc(seed++, sh[0], sh[1], sh[2]);
    auto run = [&](Backend& be) {
      DevBuf dl = upload_compute(be, cc.logits), dt = upload_ints(be, cc.targets);
      DevBuf losses = poisoned_f32(be, cc.N);
      be.classifier_forward(losses.f32(), dl.get(), dt.i32(), cc.N, cc.V, cc.Vp);
      auto after = download_compute(be, dl.get(), cc.logits.size());
      EXPECT_EQ(after, cc.logits) << be.name() << ": classifier_forward must leave the logits untouched";
      return download_f32(be, losses.get(), cc.N);
    };
    expect_twins("classifier_forward losses V=" + std::to_string(cc.V) + " Vp=" + std::to_string(cc.Vp), run(*gpu),
                 run(*cpu), cc.loss, cc.tloss_g, cc.tloss_c);
  }
}

TEST_F(CudaTwin, ClassifierBackwardInPlaceWithLossTotal) {
  uint64_t seed = 206;
  for (const auto& sh : kClassifierShapes) {
    ClassifierCase cc(seed++, sh[0], sh[1], sh[2]);
    const double start = 0.75;  // the running total before this micro-batch
    std::vector<float> dl[2], losses[2], total[2];
    Backend* bes[2] = {gpu.get(), cpu.get()};
    for (int k = 0; k < 2; k++) {
      Backend& be = *bes[k];
      DevBuf d = upload_compute(be, cc.logits), dt = upload_ints(be, cc.targets), l = poisoned_f32(be, cc.N);
      DevBuf sum(be, sizeof(double));
      be.copy_h2d(sum.get(), &start, sizeof(double));
      be.classifier_backward(d.get(), l.f32(), static_cast<double*>(sum.get()), dt.i32(), cc.dloss, cc.N, cc.V, cc.Vp);
      dl[k] = download_compute(be, d.get(), cc.logits.size());
      losses[k] = download_f32(be, l.get(), cc.N);
      double host = 0;
      be.copy_d2h(&host, sum.get(), sizeof(double));
      be.synchronize();
      total[k] = {static_cast<float>(host - start)};  // the added part, as a one-element vector for the check
    }
    const std::string tag = " V=" + std::to_string(cc.V) + " Vp=" + std::to_string(cc.Vp);
    expect_twins("classifier_backward dlogits" + tag, dl[0], dl[1], cc.dl, cc.tdl_g, cc.tdl_c);
    expect_twins("classifier_backward losses" + tag, losses[0], losses[1], cc.loss, cc.tloss_g, cc.tloss_c);
    double ref = 0, tc = 0, tg = 0;
    for (int i = 0; i < cc.N; i++) ref += cc.loss[i], tc += cc.tloss_c[i], tg += cc.tloss_g[i];
    // the float conversion of the added part costs u of it, and the double subtraction nothing at this scale
    expect_twins("classifier_backward loss total" + tag, total[0], total[1], {ref}, {tg + kU * ref}, {tc + kU * ref});
  }
}

}  // namespace
}  // namespace gpt::test
