// The MLP's fused first layer, matmul_gelu_forward: pre = inp @ w^T + bias and out = gelu(pre), on the GPU
// (one cuBLASLt product with the GELU_AUX_BIAS epilogue, or the two-op fallback) against the CPU twin
// (matmul then gelu), both against a double-precision reference. Bounds, with the terms of
// test_cuda_ops.cpp (u, ub, acc, bf16_out) and GeluBound of twin_util.h:
//   pre: as matmul_forward with a bias: cpu acc(C+1) sum(|x w| + |b|); gpu adds the bf16 output rounding
//        and one more rounding of the product (the epilogue may round it before the bias): ub |sum|.
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
      tpre_c[k] = acc(C + 1) * (abs_sum + std::fabs(bias[o]));
      tpre_g[k] = bf16_out(x, tpre_c[k]) + kUb * std::fabs(sum);
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

}  // namespace
}  // namespace gpt::test
