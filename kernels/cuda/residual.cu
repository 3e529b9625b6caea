// Residual stream on the GPU (twin of kernels/cpu/residual.cpp): out = a + b, and in backward the branch's
// input gradient is added into the stream's gradient, dstream += dbranch. Each sum is one fp32 addition of
// two bf16 values, rounded once to bf16; element-wise maps (common.cuh) with 16-byte accesses where the
// buffers are aligned. (Inside a block the model fuses these with the layernorms, layernorm.cu; these run
// for the block's output and where a recompute keeps what the fused op would write.)
#include "kernels/cuda/ops.cuh"

namespace gpt::cuda {
namespace {

struct Add {
  __device__ float operator()(float x, float y) const { return x + y; }
};

}  // namespace

void residual_forward(bf16* out, const bf16* a, const bf16* b, size_t n, cudaStream_t stream) {
  launch_map(out, a, b, n, Add{}, stream);
}

void residual_backward(bf16* dstream, const bf16* dbranch, size_t n, cudaStream_t stream) {
  launch_map(dstream, dstream, dbranch, n, Add{}, stream);
}

}  // namespace gpt::cuda
