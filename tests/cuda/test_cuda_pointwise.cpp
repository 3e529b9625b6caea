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
// Per row: M = max x_j, S = sum_j exp(x_j - M) over j < V. Each exponential carries 4u of its own: the CPU's
// fast_exp, and the GPU's exp2f((x_j - M) log2 e) (2 ulp); the argument carries u|x_j - M| (the subtraction) on
// the CPU and 3u|x_j - M| on the GPU (the subtraction, the rounded log2 e and the product). S adds acc(V);
// log(S) moves by that relative error plus 4u |log S|, and the two additions of the loss add u each.
// dlogits_j = dloss (p_j - [j == t]) with p_j = exp(x_j - M) / S. The training pass also adds the losses to a
// running fp64 total: its bound is the sum of the losses' bounds (the fp64 additions are negligible).
struct ClassifierCase {
  int N, V, Vp;
  float dloss;
  std::vector<float> logits;
  std::vector<int> targets;
  std::vector<double> loss, tloss_c, tloss_g, dl, tdl_c, tdl_g;

  ClassifierCase(uint64_t seed, int N_ = 13, int V_ = 997, int Vp_ = 1024) : N(N_), V(V_), Vp(Vp_), dloss(1.0f / N_) {
    Rng rng(seed);
    logits = uniform_bf16(rng, static_cast<size_t>(N) * Vp, -4, 4);
    for (int i = 0; i < N; i++)  // padding holds large values: any leak into the softmax shows at once
      for (int j = V; j < Vp; j++) logits[static_cast<size_t>(i) * Vp + j] = 50.0f;
    targets.resize(N);
    for (auto& t : targets) t = static_cast<int>(rng.next_u64() % V);
    targets[0] = 0, targets[1] = V - 1;
    loss.resize(N), tloss_c.resize(N), tloss_g.resize(N);
    dl.assign(logits.size(), 0.0), tdl_c.assign(logits.size(), 0.0), tdl_g.assign(logits.size(), 0.0);
    for (int i = 0; i < N; i++) reference_row(i);
  }

  void reference_row(int i) {
    const float* x = &logits[static_cast<size_t>(i) * Vp];
    const double M = *std::max_element(x, x + V);
    double S = 0, e_max_c = 0, e_max_g = 0;
    for (int j = 0; j < V; j++) {
      S += std::exp(x[j] - M);
      e_max_c = std::max(e_max_c, 4 * kU + kU * std::fabs(x[j] - M));
      e_max_g = std::max(e_max_g, 4 * kU + 3 * kU * std::fabs(x[j] - M));
    }
    const double logS = std::log(S);
    loss[i] = logS + M - x[targets[i]];
    const double eS_c = acc(V) + e_max_c, eS_g = acc(V) + e_max_g;
    auto tloss = [&](double eS) { return eS + 4 * kU * std::fabs(logS) + kU * std::fabs(logS + M) + kU * std::fabs(loss[i]); };
    tloss_c[i] = tloss(eS_c), tloss_g[i] = tloss(eS_g);
    for (int j = 0; j < V; j++) {
      const size_t k = static_cast<size_t>(i) * Vp + j;
      const double p = std::exp(x[j] - M) / S, hot = j == targets[i] ? 1.0 : 0.0;
      dl[k] = dloss * (p - hot);
      auto tdl = [&](double e_exp, double eS) {
        const double ep = p * (e_exp + eS + 2 * kU);
        return dloss * (ep + kU * std::fabs(p - hot)) + 2 * kU * std::fabs(dl[k]);
      };
      tdl_c[k] = tdl(4 * kU + kU * std::fabs(x[j] - M), eS_c);
      tdl_g[k] = bf16_out(dl[k], tdl(4 * kU + 3 * kU * std::fabs(x[j] - M), eS_g));
    }  // padded columns: exactly 0 on both, bound 0
  }
};

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
