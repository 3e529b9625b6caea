// The MLP's fused first layer, matmul_gelu_forward: pre = inp @ w^T + bias and out = gelu(pre), on the GPU
// (one cuBLASLt product with the GELU_AUX_BIAS epilogue, or the two-op fallback) against the CPU twin
// (matmul then gelu), both against a double-precision reference; and the backward of the layer after it,
// gelu_matmul_backward (the DGELU epilogue, or the product then gelu_backward). Bounds, with the terms of
// test_cuda_ops.cpp (u, ub, acc, bf16_out) and GeluBound of twin_util.h:
//   pre: as matmul_forward with a bias, linear_bound (twin_util.h): the one bias derivation of both tests.
//   out: the GELU of a perturbed pre moves by at most max|gelu'| = 1.1289 (tanh form, at x = 1.50; 1.13
//        here) times pre's error. The GPU may evaluate GELU on the fp32 accumulator (epilogue) or on the
//        bf16 pre (fallback): gpu pre's bound covers both. The epilogue's own tanh may be the hardware
//        approximation (tanh.approx.f32, relative error below 2^-10.98): 0.5 |x| 2^-10 more. Then our own
//        GELU kernel's bound |x| ds and, on the GPU, the output's bf16 rounding.
#include <cmath>
#include <string>
#include <vector>

#include "tests/cuda/twin_util.h"

namespace gpt::test {
namespace {

constexpr double kGeluSlope = 1.13;

void check_matmul_gelu(Backend& gpu, Backend& cpu, int N, int C, int OC, uint64_t seed) {
  Rng rng(seed);
  auto inp = uniform_bf16(rng, static_cast<size_t>(N) * C, -1, 1);
  auto w = uniform_bf16(rng, static_cast<size_t>(OC) * C, -0.3f, 0.3f);
  auto bias = uniform_bf16(rng, OC, -1, 1);
  const size_t n = static_cast<size_t>(N) * OC;
  std::vector<double> pre(n), tpre_c(n), tpre_g(n), out(n), tout_c(n), tout_g(n);
  for (int i = 0; i < N; i++)
    for (int o = 0; o < OC; o++) {
      double sum = 0, abs_sum = 0;
      for (int c = 0; c < C; c++) {
        const double p = static_cast<double>(inp[static_cast<size_t>(i) * C + c]) * w[static_cast<size_t>(o) * C + c];
        sum += p, abs_sum += std::fabs(p);
      }
      const size_t k = static_cast<size_t>(i) * OC + o;
      const double x = sum + bias[o];
      pre[k] = x;
      const LinearBound lb = linear_bound(C, sum, abs_sum, bias[o], true);
      tpre_c[k] = lb.cpu, tpre_g[k] = lb.gpu;
      out[k] = 0.5 * x * (1 + std::tanh(kS2Pi * (x + kCubic * x * x * x)));
      const double own = std::fabs(x) * GeluBound(x).ds + kU * std::fabs(out[k]);
      tout_c[k] = kGeluSlope * tpre_c[k] + own;
      tout_g[k] = bf16_out(out[k], kGeluSlope * tpre_g[k] + own + 0.5 * std::fabs(x) * std::ldexp(1.0, -10));
    }
  std::vector<float> got_pre[2], got_out[2];
  Backend* bes[2] = {&gpu, &cpu};
  for (int b = 0; b < 2; b++) {
    Backend& be = *bes[b];
    DevBuf di = upload_compute(be, inp), dw = upload_compute(be, w), db = upload_compute(be, bias);
    DevBuf p = poisoned_compute(be, n), o = poisoned_compute(be, n);
    be.matmul_gelu_forward(o.get(), p.get(), di.get(), dw.get(), db.get(), N, C, OC);
    got_pre[b] = download_compute(be, p.get(), n);
    got_out[b] = download_compute(be, o.get(), n);
  }
  const std::string tag = " N=" + std::to_string(N) + " C=" + std::to_string(C) + " OC=" + std::to_string(OC);
  expect_twins("matmul_gelu_forward pre" + tag, got_pre[0], got_pre[1], pre, tpre_g, tpre_c);
  expect_twins("matmul_gelu_forward out" + tag, got_out[0], got_out[1], out, tout_g, tout_c);
}

TEST_F(CudaTwin, MatmulGeluForward) {
  check_matmul_gelu(*gpu, *cpu, 64, 128, 512, 601);  // the epilogue's shape class (OC % 8 == 0)
  check_matmul_gelu(*gpu, *cpu, 37, 72, 50, 602);    // OC % 8 != 0: the two-op fallback
}

// gelu_matmul_backward: dpre = gelu'(pre) * P with P = dout @ w (K = OC products per element), dw and dbias as
// matmul_backward with inp = gelu(pre). Bounds, with GeluBound's ds (twin_util.h):
//   gelu'(x) = s + T2, T2 = 2 x s (1 - s) du/dx; evaluated in fp32 it carries e_grad (the derivation of
//   test_cuda_pointwise.cpp's GeluBackward), and P carries eP = acc(OC) sum |dout w|.
//   cpu: matmul then gelu_backward, all fp32: |gelu'| eP + |P| e_grad + u |ref|.
//   gpu, either path: the DGELU epilogue multiplies the fp32 product by its own gelu'(pre), whose tanh may be
//   the hardware approximation (relative error below 2^-10.98 on t = tanh(u)), moving gelu' = 0.5 (1 + t) +
//   0.5 x (1 - t^2) du/dx by at most (0.5 + |x t| du/dx) |t| 2^-10.98; the fallback rounds P to bf16 (ub |P|)
//   and runs our GELU kernel (e_grad). The bound takes both, then the output's bf16 rounding.
void check_gelu_matmul_backward(Backend& gpu, Backend& cpu, int N, int C, int OC, uint64_t seed) {
  Rng rng(seed);
  auto pre = uniform_bf16(rng, static_cast<size_t>(N) * C, -4, 4);
  auto dout = uniform_bf16(rng, static_cast<size_t>(N) * OC, -1, 1);
  auto w = uniform_bf16(rng, static_cast<size_t>(OC) * C, -0.5f, 0.5f);
  auto dw0 = uniform_f32(rng, w.size(), -1, 1), db0 = uniform_f32(rng, OC, -1, 1);
  std::vector<float> inp(pre.size());  // gelu(pre) as the forward stored it: the same bf16 numbers on both
  for (size_t i = 0; i < pre.size(); i++) {
    const double x = pre[i];
    inp[i] = round_bf16(static_cast<float>(0.5 * x * (1 + std::tanh(kS2Pi * (x + kCubic * x * x * x)))));
  }
  std::vector<double> rdp(pre.size()), tdp_c(pre.size()), tdp_g(pre.size());
  for (int i = 0; i < N; i++)
    for (int c = 0; c < C; c++) {
      double P = 0, aP = 0;
      for (int o = 0; o < OC; o++) {
        const double p = static_cast<double>(dout[static_cast<size_t>(i) * OC + o]) * w[static_cast<size_t>(o) * C + c];
        P += p, aP += std::fabs(p);
      }
      const size_t k = static_cast<size_t>(i) * C + c;
      const double x = pre[k];
      const double t = std::tanh(kS2Pi * (x + kCubic * x * x * x));
      const double dudx = kS2Pi * (1 + 3 * kCubic * x * x);
      const double grad = 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * dudx;
      rdp[k] = grad * P;
      const GeluBound g(x);
      const double t2 = 2 * x * g.s * (1 - g.s) * dudx;
      const double e_t2 = 2 * std::fabs(x) * dudx * (g.ds + 2 * kU * g.s) + 6 * kU * std::fabs(t2);
      const double e_grad = g.ds + e_t2 + kU * (g.s + std::fabs(t2));
      const double eP = acc(OC) * aP;
      tdp_c[k] = std::fabs(grad) * eP + std::fabs(P) * e_grad + kU * std::fabs(rdp[k]);
      const double e_approx = (0.5 + std::fabs(x * t) * dudx) * std::fabs(t) * std::ldexp(1.0, -10) + e_grad;
      const double e_gpu = std::fabs(grad) * (eP + kUb * (std::fabs(P) + eP)) + (std::fabs(P) + eP) * e_approx +
                           kU * std::fabs(rdp[k]);
      tdp_g[k] = bf16_out(rdp[k], e_gpu);
    }
  std::vector<double> rdw(w.size()), tdw(w.size()), rdb(OC), tdb(OC);
  for (int o = 0; o < OC; o++) {
    double sb = db0[o], ab = std::fabs(db0[o]);
    for (int i = 0; i < N; i++)
      sb += dout[static_cast<size_t>(i) * OC + o], ab += std::fabs(dout[static_cast<size_t>(i) * OC + o]);
    rdb[o] = sb, tdb[o] = acc(N + 1) * ab;
    for (int c = 0; c < C; c++) {
      const size_t k = static_cast<size_t>(o) * C + c;
      double sum = dw0[k], abs_sum = std::fabs(dw0[k]);
      for (int i = 0; i < N; i++) {
        const double p = static_cast<double>(dout[static_cast<size_t>(i) * OC + o]) * inp[static_cast<size_t>(i) * C + c];
        sum += p, abs_sum += std::fabs(p);
      }
      rdw[k] = sum, tdw[k] = acc(N + 1) * abs_sum;
    }
  }
  std::vector<float> dp[2], dw[2], db[2];
  Backend* bes[2] = {&gpu, &cpu};
  for (int b = 0; b < 2; b++) {
    Backend& be = *bes[b];
    DevBuf dd = upload_compute(be, dout), di = upload_compute(be, inp), dpre = upload_compute(be, pre);
    DevBuf dww = upload_compute(be, w), gw = upload_f32(be, dw0), gb = upload_f32(be, db0);
    DevBuf o = poisoned_compute(be, pre.size());
    be.gelu_matmul_backward(o.get(), gw.f32(), gb.f32(), dd.get(), di.get(), dpre.get(), dww.get(), N, C, OC);
    dp[b] = download_compute(be, o.get(), pre.size());
    dw[b] = download_f32(be, gw.get(), w.size());
    db[b] = download_f32(be, gb.get(), OC);
  }
  const std::string tag = " N=" + std::to_string(N) + " C=" + std::to_string(C) + " OC=" + std::to_string(OC);
  expect_twins("gelu_matmul_backward dpre" + tag, dp[0], dp[1], rdp, tdp_g, tdp_c);
  expect_twins("gelu_matmul_backward dw" + tag, dw[0], dw[1], rdw, tdw, tdw);
  expect_twins("gelu_matmul_backward dbias" + tag, db[0], db[1], rdb, tdb, tdb);
}

TEST_F(CudaTwin, GeluMatmulBackward) {
  check_gelu_matmul_backward(*gpu, *cpu, 64, 256, 128, 611);  // C % 8 == 0: the DGELU epilogue's shape class
  check_gelu_matmul_backward(*gpu, *cpu, 37, 50, 72, 612);    // C % 8 != 0: the product, then gelu_backward
}

}  // namespace
}  // namespace gpt::test
