// GELU, tanh approximation (GPT-2's): gelu(x) = 0.5 x (1 + tanh(u)), u = sqrt(2/pi) (x + 0.044715 x^3).
// Since 0.5 (1 + tanh(u)) = sigmoid(2u) = 1 / (1 + exp(-2u)), it is computed as x * s with s = sigmoid(2u):
// one vectorisable exp instead of a scalar tanhf, and no cancellation near u = 0 or for large |u|.
// Derivative: s + x * 2 s (1 - s) * du/dx, with du/dx = sqrt(2/pi) (1 + 3 * 0.044715 x^2).
#include "kernels/cpu/ops.h"

namespace gpt::cpu {

namespace {
constexpr float kSqrt2OverPi = 0.7978845608028654f;
constexpr float kCubic = 0.044715f;
}  // namespace

void gelu_forward(float* out, const float* inp, size_t n) {
  parallel_ranges(n, [=](size_t i0, size_t i1) {
#pragma omp simd
    for (size_t i = i0; i < i1; i++) {
      float x = inp[i];
      float u = kSqrt2OverPi * (x + kCubic * x * x * x);
      out[i] = x / (1.0f + fast_exp(-2.0f * u));
    }
  });
}

void gelu_backward(float* dinp, const float* inp, const float* dout, size_t n) {
  parallel_ranges(n, [=](size_t i0, size_t i1) {
#pragma omp simd
    for (size_t i = i0; i < i1; i++) {
      // Clamped so x^2 cannot overflow (inf * 0 = NaN); beyond |x| = 1e4 the sigmoid is exactly 0 or 1.
      float x = inp[i] < -1e4f ? -1e4f : (inp[i] > 1e4f ? 1e4f : inp[i]);  // NaN stays NaN
      float u = kSqrt2OverPi * (x + kCubic * x * x * x);
      float s = 1.0f / (1.0f + fast_exp(-2.0f * u));
      float du = kSqrt2OverPi * (1.0f + 3.0f * kCubic * x * x);
      dinp[i] = dout[i] * (s + 2.0f * x * s * (1.0f - s) * du);
    }
  });
}

}  // namespace gpt::cpu
