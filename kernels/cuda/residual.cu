// Residual stream on the GPU (twin of kernels/cpu/residual.cpp): out = a + b, and in backward the branch's
// input gradient is added into the stream's gradient, dstream += dbranch. Each sum is one fp32 addition of
// two bf16 values, rounded once to bf16; element-wise maps (common.cuh) with 16-byte accesses where the
// buffers are aligned. (Inside a block the model fuses these with the layernorms, layernorm.cu; these run
// for the block's output and where a recompute keeps what the fused op would write.)
//
// add_table_rows is the same addition with the second operand a row of a small table, picked per row: the
// position embedding of a row range (encoder.cu's position_forward) and a bias (matmul.cu's bias_forward). It
// lives here, with the other adds, and is compiled once (its cpu twin is the inline helper of ops.h).
#include "kernels/cuda/ops.cuh"

namespace gpt::cuda {
namespace {

struct Add {
  __device__ float operator()(float x, float y) const { return x + y; }
};

// x[i] += table[(first + i) % period] for the rows of x (C channels each), in fp32, rounded once to bf16. With
// kVecPath (C % 8 == 0, x and table 16-byte aligned) each thread adds 8 channels with 16-byte accesses, otherwise
// one element: the same arithmetic. `units` is n*C/8 or n*C.
template <bool kVecPath>
__global__ void add_table_rows_kernel(bf16* x, const bf16* table, int first, int period, int C, size_t units) {
  const size_t per_row = kVecPath ? static_cast<size_t>(C / kVec) : static_cast<size_t>(C);
  for (size_t u = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; u < units;
       u += static_cast<size_t>(gridDim.x) * blockDim.x) {
    const size_t row = u / per_row;
    const size_t c = (u % per_row) * (kVecPath ? kVec : 1);
    const size_t t = (static_cast<size_t>(first) + row) % static_cast<size_t>(period);
    bf16* xr = x + row * C + c;
    const bf16* tr = table + t * C + c;
    if constexpr (kVecPath) {
      float a[kVec], b[kVec];
      load8(a, xr);
      load8(b, tr);
#pragma unroll
      for (int k = 0; k < kVec; k++) a[k] += b[k];
      store8(xr, a);
    } else {
      *xr = to_bf16(to_f32(*xr) + to_f32(*tr));
    }
  }
}

}  // namespace

void residual_forward(bf16* out, const bf16* a, const bf16* b, size_t n, cudaStream_t stream) {
  launch_map(out, a, b, n, Add{}, stream);
}

void residual_backward(bf16* dstream, const bf16* dbranch, size_t n, cudaStream_t stream) {
  launch_map(dstream, dstream, dbranch, n, Add{}, stream);
}

void add_table_rows(bf16* x, const bf16* table, int first, int n, int period, int C, cudaStream_t stream) {
  const size_t total = static_cast<size_t>(n) * C;
  if (total == 0) return;
  const int threads = 256;
  if (C % kVec == 0 && aligned16(x) && aligned16(table))
    GPT_LAUNCH(add_table_rows_kernel<true>, grid_for(total / kVec, threads), threads, 0, stream, x, table, first,
               period, C, total / kVec);
  else
    GPT_LAUNCH(add_table_rows_kernel<false>, grid_for(total, threads), threads, 0, stream, x, table, first, period, C,
               total);
}

}  // namespace gpt::cuda
