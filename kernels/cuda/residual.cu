// Residual stream on the GPU (twin of kernels/cpu/residual.cpp): out = a + b, and in backward the branch's
// input gradient is added into the stream's gradient, dstream += dbranch. Each sum is one fp32 addition of
// two bf16 values, rounded once to bf16.
#include "kernels/cuda/ops.cuh"

namespace gpt::cuda {
namespace {

__global__ void residual_forward_kernel(bf16* out, const bf16* a, const bf16* b, size_t n) {
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x)
    out[i] = to_bf16(to_f32(a[i]) + to_f32(b[i]));
}

__global__ void residual_backward_kernel(bf16* dstream, const bf16* dbranch, size_t n) {
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x)
    dstream[i] = to_bf16(to_f32(dstream[i]) + to_f32(dbranch[i]));
}

}  // namespace

void residual_forward(bf16* out, const bf16* a, const bf16* b, size_t n, cudaStream_t stream) {
  if (n == 0) return;
  residual_forward_kernel<<<grid_for(n, 256), 256, 0, stream>>>(out, a, b, n);
  CUDA_CHECK_LAUNCH();
}

void residual_backward(bf16* dstream, const bf16* dbranch, size_t n, cudaStream_t stream) {
  if (n == 0) return;
  residual_backward_kernel<<<grid_for(n, 256), 256, 0, stream>>>(dstream, dbranch, n);
  CUDA_CHECK_LAUNCH();
}

}  // namespace gpt::cuda
