// LayerNorm over the last dimension on the GPU (twin of kernels/cpu/layernorm.cpp), eps 1e-5.
// Forward: one warp per row; mean, then the two-pass (centred) variance, all in fp32; out rounded to
// bf16 once. mean and rstd are kept in fp32 for backward.
// Backward, with norm = (x - mean) * rstd and dnorm = w * dout:
//   dinp = rstd * (dnorm - mean(dnorm) - norm * mean(dnorm * norm))   one warp per row, overwritten
//   dw  += sum_rows dout * norm,  db += sum_rows dout                   two stages, deterministic:
// stage 1 gives each (chunk of rows, column) an fp32 partial in scratch, stage 2 adds the chunks in a
// fixed order and accumulates into dw and db. No atomics, so results repeat bit for bit.
#include "kernels/cuda/ops.cuh"

namespace gpt::cuda {
namespace {

constexpr float kEps = 1e-5f;
constexpr int kRowsPerBlock = 8;  // warps per block in the row kernels
constexpr int kChunks = kLayernormChunks;  // row chunks of the dw/db reduction (kernels/sizes.h; fixed: deterministic)
constexpr int kColTile = 32;      // columns per block in the dw/db reduction
constexpr int kRowThreads = 8;    // threads along rows per block in the dw/db reduction

__global__ void layernorm_forward_kernel(bf16* out, float* mean, float* rstd, const bf16* inp, const bf16* w,
                                         const bf16* b, int N, int C) {
  const int lane = threadIdx.x % kWarp;
  const int row = blockIdx.x * kRowsPerBlock + threadIdx.x / kWarp;
  if (row >= N) return;  // uniform per warp
  const bf16* x = inp + static_cast<size_t>(row) * C;
  float sum = 0.0f;
  for (int c = lane; c < C; c += kWarp) sum += to_f32(x[c]);
  const float m = warp_sum(sum) / C;
  float sq = 0.0f;
  for (int c = lane; c < C; c += kWarp) {
    const float d = to_f32(x[c]) - m;
    sq += d * d;
  }
  const float r = 1.0f / sqrtf(warp_sum(sq) / C + kEps);
  bf16* y = out + static_cast<size_t>(row) * C;
  for (int c = lane; c < C; c += kWarp) y[c] = to_bf16((to_f32(x[c]) - m) * r * to_f32(w[c]) + to_f32(b[c]));
  if (lane == 0) {
    mean[row] = m;
    rstd[row] = r;
  }
}

__global__ void layernorm_backward_dinp_kernel(bf16* dinp, const bf16* dout, const bf16* inp, const bf16* w,
                                               const float* mean, const float* rstd, int N, int C) {
  const int lane = threadIdx.x % kWarp;
  const int row = blockIdx.x * kRowsPerBlock + threadIdx.x / kWarp;
  if (row >= N) return;
  const size_t off = static_cast<size_t>(row) * C;
  const float m = mean[row], r = rstd[row];
  float sum_dnorm = 0.0f, sum_dnorm_norm = 0.0f;
  for (int c = lane; c < C; c += kWarp) {
    const float norm = (to_f32(inp[off + c]) - m) * r;
    const float dnorm = to_f32(w[c]) * to_f32(dout[off + c]);
    sum_dnorm += dnorm;
    sum_dnorm_norm += dnorm * norm;
  }
  const float a = warp_sum(sum_dnorm) / C;
  const float q = warp_sum(sum_dnorm_norm) / C;
  for (int c = lane; c < C; c += kWarp) {
    const float norm = (to_f32(inp[off + c]) - m) * r;
    const float dnorm = to_f32(w[c]) * to_f32(dout[off + c]);
    dinp[off + c] = to_bf16((dnorm - a - norm * q) * r);
  }
}

// Stage 1: block (kColTile x kRowThreads) covers columns [blockIdx.x*kColTile, +kColTile) and rows
// r = blockIdx.y*kRowThreads + ty, stepping by kChunks*kRowThreads. Partials: scratch (2, kChunks, C).
__global__ void layernorm_backward_partials_kernel(float* partials, const bf16* dout, const bf16* inp,
                                                   const float* mean, const float* rstd, int N, int C) {
  __shared__ float sdw[kRowThreads][kColTile];
  __shared__ float sdb[kRowThreads][kColTile];
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int c = blockIdx.x * kColTile + tx;
  const int chunk = blockIdx.y;
  float dw = 0.0f, db = 0.0f;
  if (c < C) {
    for (int r = chunk * kRowThreads + ty; r < N; r += kChunks * kRowThreads) {
      const size_t i = static_cast<size_t>(r) * C + c;
      const float d = to_f32(dout[i]);
      dw += d * (to_f32(inp[i]) - mean[r]) * rstd[r];
      db += d;
    }
  }
  sdw[ty][tx] = dw;
  sdb[ty][tx] = db;
  __syncthreads();
  if (ty == 0 && c < C) {
    float sw = 0.0f, sb = 0.0f;
    for (int k = 0; k < kRowThreads; k++) {  // fixed order
      sw += sdw[k][tx];
      sb += sdb[k][tx];
    }
    partials[static_cast<size_t>(chunk) * C + c] = sw;
    partials[static_cast<size_t>(kChunks + chunk) * C + c] = sb;
  }
}

// Stage 2: one thread per column adds the kChunks partials in order into dw and db.
__global__ void layernorm_backward_reduce_kernel(float* dw, float* db, const float* partials, int C) {
  const int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= C) return;
  float sw = 0.0f, sb = 0.0f;
  for (int k = 0; k < kChunks; k++) {
    sw += partials[static_cast<size_t>(k) * C + c];
    sb += partials[static_cast<size_t>(kChunks + k) * C + c];
  }
  dw[c] += sw;
  db[c] += sb;
}

}  // namespace

void layernorm_forward(bf16* out, float* mean, float* rstd, const bf16* inp, const bf16* w, const bf16* b,
                       int N, int C, cudaStream_t stream) {
  if (N == 0) return;
  const unsigned blocks = static_cast<unsigned>(ceil_div(N, kRowsPerBlock));
  layernorm_forward_kernel<<<blocks, kRowsPerBlock * kWarp, 0, stream>>>(out, mean, rstd, inp, w, b, N, C);
  CUDA_CHECK_LAUNCH();
}

void layernorm_backward(bf16* dinp, float* dw, float* db, const bf16* dout, const bf16* inp, const bf16* w,
                        const float* mean, const float* rstd, int N, int C, void* scratch,
                        cudaStream_t stream) {
  if (N == 0) return;
  const unsigned row_blocks = static_cast<unsigned>(ceil_div(N, kRowsPerBlock));
  layernorm_backward_dinp_kernel<<<row_blocks, kRowsPerBlock * kWarp, 0, stream>>>(dinp, dout, inp, w, mean,
                                                                                   rstd, N, C);
  CUDA_CHECK_LAUNCH();
  float* partials = static_cast<float*>(scratch);  // (2, kChunks, C)
  const dim3 grid(static_cast<unsigned>(ceil_div(C, kColTile)), kChunks);
  const dim3 block(kColTile, kRowThreads);
  layernorm_backward_partials_kernel<<<grid, block, 0, stream>>>(partials, dout, inp, mean, rstd, N, C);
  CUDA_CHECK_LAUNCH();
  const int threads = 256;
  layernorm_backward_reduce_kernel<<<static_cast<unsigned>(ceil_div(C, threads)), threads, 0, stream>>>(
      dw, db, partials, C);
  CUDA_CHECK_LAUNCH();
}

}  // namespace gpt::cuda
