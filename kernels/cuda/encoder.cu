// Token + position embedding on the GPU (twin of kernels/cpu/encoder.cpp).
// Forward: out[b,t,:] = wte[tokens[b,t],:] + wpe[t,:], summed in fp32, rounded once to bf16.
// Backward: dwpe[t,:] += sum_b dout[b,t,:] is one thread per (t,c) looping over b in order
// (deterministic); dwte[tok,:] += dout[b,t,:] uses fp32 atomics because several positions may carry the
// same token. Atomic order varies between runs, so dwte is reproducible only to fp32 rounding
// (|difference| <= (B*T) * 2^-24 * sum of |terms| per element).
#include "kernels/cuda/ops.cuh"

namespace gpt::cuda {
namespace {

__global__ void encoder_forward_kernel(bf16* out, const int* tokens, const bf16* wte, const bf16* wpe, int T,
                                       int C, size_t total) {
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    const size_t bt = i / C;  // row in (B*T)
    const int c = static_cast<int>(i % C);
    const int t = static_cast<int>(bt % T);
    const size_t tok = static_cast<size_t>(tokens[bt]);
    out[i] = to_bf16(to_f32(wte[tok * C + c]) + to_f32(wpe[static_cast<size_t>(t) * C + c]));
  }
}

__global__ void encoder_backward_wte_kernel(float* dwte, const bf16* dout, const int* tokens, int C,
                                            size_t total) {
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    const size_t bt = i / C;
    const int c = static_cast<int>(i % C);
    const size_t tok = static_cast<size_t>(tokens[bt]);
    atomicAdd(&dwte[tok * C + c], to_f32(dout[i]));
  }
}

// One thread per (t, c): dwpe[t,c] += sum over b, in order b = 0..B-1.
__global__ void encoder_backward_wpe_kernel(float* dwpe, const bf16* dout, int B, int T, int C) {
  const size_t TC = static_cast<size_t>(T) * C;
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < TC;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    float sum = 0.0f;
    for (int b = 0; b < B; b++) sum += to_f32(dout[b * TC + i]);
    dwpe[i] += sum;
  }
}

}  // namespace

void encoder_forward(bf16* out, const int* tokens, const bf16* wte, const bf16* wpe, int B, int T, int C,
                     cudaStream_t stream) {
  const size_t total = static_cast<size_t>(B) * T * C;
  const int threads = 256;
  encoder_forward_kernel<<<grid_for(total, threads), threads, 0, stream>>>(out, tokens, wte, wpe, T, C, total);
  CUDA_CHECK_LAUNCH();
}

void encoder_backward(float* dwte, float* dwpe, const bf16* dout, const int* tokens, int B, int T, int C,
                      cudaStream_t stream) {
  const size_t total = static_cast<size_t>(B) * T * C;
  const int threads = 256;
  encoder_backward_wte_kernel<<<grid_for(total, threads), threads, 0, stream>>>(dwte, dout, tokens, C, total);
  CUDA_CHECK_LAUNCH();
  const size_t tc = static_cast<size_t>(T) * C;
  encoder_backward_wpe_kernel<<<grid_for(tc, threads), threads, 0, stream>>>(dwpe, dout, B, T, C);
  CUDA_CHECK_LAUNCH();
}

}  // namespace gpt::cuda
