// GELU with GPT-2's tanh approximation on the GPU (twin of kernels/cpu/gelu.cpp), fp32 math on bf16 data:
//   gelu(x) = 0.5 x (1 + tanh(u)) = x * s,  u = sqrt(2/pi) (x + 0.044715 x^3),  s = sigmoid(2u)
// The sigmoid form has no cancellation where tanh(u) is near -1 (large negative x), unlike 1 + tanh(u).
//   gelu'(x) = s + 2 x s (1 - s) du/dx,  du/dx = sqrt(2/pi) (1 + 3 * 0.044715 x^2)
// Backward overwrites dinp = dout * gelu'(inp) (dinp may be dout: in place); x is clamped to |x| <= 1e4
// there so x^2 cannot overflow (beyond that s is exactly 0 or 1, as in the CPU twin).
// Both run as element-wise maps (common.cuh): 16-byte accesses where the buffers are aligned. In the model
// the forward GELU is usually the fc product's epilogue and the backward the fcproj product's (matmul.cu);
// these kernels are the fallbacks, and the forward of --recompute selective.
#include "kernels/cuda/ops.cuh"

namespace gpt::cuda {
namespace {

constexpr float kSqrt2OverPi = 0.7978845608028654f;
constexpr float kCubic = 0.044715f;

struct GeluForward {
  __device__ float operator()(float x, float) const {
    const float u = kSqrt2OverPi * (x + kCubic * x * x * x);
    return x / (1.0f + expf(-2.0f * u));
  }
};

struct GeluBackward {  // (inp, dout)
  __device__ float operator()(float xr, float dout) const {
    const float x = xr < -1e4f ? -1e4f : (xr > 1e4f ? 1e4f : xr);  // NaN stays NaN
    const float u = kSqrt2OverPi * (x + kCubic * x * x * x);
    const float s = 1.0f / (1.0f + expf(-2.0f * u));
    const float du = kSqrt2OverPi * (1.0f + 3.0f * kCubic * x * x);
    const float grad = s + 2.0f * x * s * (1.0f - s) * du;
    return grad * dout;
  }
};

}  // namespace

void gelu_forward(bf16* out, const bf16* inp, size_t n, cudaStream_t stream) {
  launch_map(out, inp, nullptr, n, GeluForward{}, stream);
}

void gelu_backward(bf16* dinp, const bf16* inp, const bf16* dout, size_t n, cudaStream_t stream) {
  launch_map(dinp, inp, dout, n, GeluBackward{}, stream);
}

}  // namespace gpt::cuda
