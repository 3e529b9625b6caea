// LayerNorm over the last dimension on the GPU (twin of kernels/cpu/layernorm.cpp), eps 1e-5, and its fusions
// with the residual stream.
//
// Forward (layernorm_forward, residual_layernorm_forward): one warp per row. Lane l owns the 8-element
// pieces q = l, l + 32, ... of the row (columns 8q..8q+7), read as one 16-byte vector each where the row
// allows it. Pass 1 sums the row (the fused op first forms res = a + b in fp32, rounds it to bf16 and
// stores it, and sums the stored values), pass 2 the centred squares, pass 3 writes out rounded once to
// bf16; passes 2 and 3 re-read the row, which the warp has just touched (L1). mean and rstd stay fp32.
// Both ops and both access paths (16-byte vectors, or one element at a time for rows that are not
// 16-byte aligned) run the same code on the same values in the same order, with explicit roundings
// (__fadd_rn, __fmaf_rn, ...) that the compiler cannot contract differently: residual_layernorm_forward
// produces bit for bit what residual_forward then layernorm_forward produce, so a recompute that re-runs
// only the layernorm from the kept res2 reproduces ln2 exactly.
//
// Backward (layernorm_backward overwrites dinp, layernorm_backward_residual adds it into the residual
// gradient: dres += dinp, without rounding dinp to bf16 first), with norm = (x - mean) * rstd and
// dnorm = w * dout:
//   dinp = rstd * (dnorm - mean(dnorm) - norm * mean(dnorm * norm))     one warp per row
//   dw += sum_rows dout * norm,  db += sum_rows dout                      two launches, deterministic:
// kernel 1 gives each block a fixed range of rows (the partition depends only on N); each warp walks its
// rows, writes the row's input gradient and adds its dw/db terms into its own shared-memory slice (each
// lane owns its columns, so no two threads add to one address); the block then sums its warps' slices in
// warp order into a (block, 2, C) fp32 partial in scratch. Kernel 2 adds the blocks' partials in block order
// into dw and db. No atomics: results repeat bit for bit. (One launch would need a completion counter that
// survives between calls, which the shared scratch cannot hold; the second launch reads 2 * 128 * C floats.)
//
// What only a GPU run can check: the shared-memory opt-in above 48 KiB for large C (C > 768 with 8 warps),
// the bandwidth reached, and the 128-bit accesses in the SASS.
#include <algorithm>

#include "kernels/cuda/ops.cuh"

namespace gpt::cuda {
namespace {

constexpr float kEps = 1e-5f;
constexpr int kRowsPerBlock = 8;             // warps (rows in flight) per block in the forward
constexpr int kBwdWarps = 8;                 // most warps per block in the backward
constexpr int kBlocks = kLayernormBlocks;    // most blocks (row ranges) of the backward (kernels/sizes.h)
constexpr int kReduceRows = 16;              // threads along the block partials in the final reduction

// The row sum's statistics, as explicit roundings so every instantiation computes the same bits.
__device__ __forceinline__ float row_mean(float sum, int C) { return __fdiv_rn(warp_sum(sum), static_cast<float>(C)); }
__device__ __forceinline__ float row_rstd(float sq, int C) {
  return __frcp_rn(__fsqrt_rn(__fadd_rn(__fdiv_rn(warp_sum(sq), static_cast<float>(C)), kEps)));
}

// kResidual: res = a + b (stored), layernorm of res; else layernorm of a. kVecPath: C % 8 == 0 and every
// pointer 16-byte aligned (each row's pieces are whole aligned vectors).
template <bool kResidual, bool kVecPath>
__global__ void __launch_bounds__(kRowsPerBlock* kWarp)
    layernorm_forward_kernel(bf16* res, bf16* out, float* mean, float* rstd, const bf16* a, const bf16* b,
                             const bf16* w, const bf16* bias, int N, int C) {
  const int lane = threadIdx.x % kWarp;
  const int row = blockIdx.x * kRowsPerBlock + threadIdx.x / kWarp;
  if (row >= N) return;  // uniform per warp
  const size_t off = static_cast<size_t>(row) * C;
  const bf16* x = kResidual ? res + off : a + off;  // the layernorm's input row, as stored

  float sum = 0.0f;
  for (int c0 = lane * kVec; c0 < C; c0 += kWarp * kVec) {
    const int n = min(kVec, C - c0);
    float v[kVec] = {};
    if constexpr (kResidual) {
      float y[kVec] = {};
      load_row8<kVecPath>(v, a + off + c0, n);
      load_row8<kVecPath>(y, b + off + c0, n);
#pragma unroll
      for (int k = 0; k < kVec; k++) v[k] = to_f32(to_bf16(__fadd_rn(v[k], y[k])));  // the stored value
      store_row8<kVecPath>(res + off + c0, v, n);
    } else {
      load_row8<kVecPath>(v, x + c0, n);
    }
#pragma unroll
    for (int k = 0; k < kVec; k++)
      if (k < n) sum = __fadd_rn(sum, v[k]);
  }
  const float m = row_mean(sum, C);

  float sq = 0.0f;  // re-reads this lane's own elements (for res: its own stores, program order)
  for (int c0 = lane * kVec; c0 < C; c0 += kWarp * kVec) {
    const int n = min(kVec, C - c0);
    float v[kVec] = {};
    load_row8<kVecPath>(v, x + c0, n);
#pragma unroll
    for (int k = 0; k < kVec; k++)
      if (k < n) {
        const float d = __fsub_rn(v[k], m);
        sq = __fmaf_rn(d, d, sq);
      }
  }
  const float r = row_rstd(sq, C);

  for (int c0 = lane * kVec; c0 < C; c0 += kWarp * kVec) {
    const int n = min(kVec, C - c0);
    float v[kVec] = {}, wv[kVec] = {}, bv[kVec] = {};
    load_row8<kVecPath>(v, x + c0, n);
    load_row8<kVecPath>(wv, w + c0, n);
    load_row8<kVecPath>(bv, bias + c0, n);
#pragma unroll
    for (int k = 0; k < kVec; k++) v[k] = __fmaf_rn(__fmul_rn(__fsub_rn(v[k], m), r), wv[k], bv[k]);
    store_row8<kVecPath>(out + off + c0, v, n);
  }
  if (lane == 0) {
    mean[row] = m;
    rstd[row] = r;
  }
}

// Kernel 1 of the backward. Block b covers rows [b * rows_per_block, +rows_per_block); warp w of it takes
// every (blockDim/32)-th of those rows. Shared memory: per warp, dw then db partial sums for the row's
// columns, laid out [k][q] for column 8q + k (q = the lane's piece), so a warp's 32 lanes touch 32
// consecutive words. partials: (gridDim.x, 2, C).
template <bool kAccumulate, bool kVecPath>
__global__ void __launch_bounds__(kBwdWarps* kWarp)
    layernorm_backward_rows_kernel(bf16* dinp, float* partials, const bf16* dout, const bf16* inp, const bf16* w,
                                   const float* mean, const float* rstd, int N, int C, int rows_per_block) {
  GPT_DYNAMIC_SHARED(float, smem);  // (warps, 2, 8, C8)
  const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp, warps = blockDim.x / kWarp;
  const int C8 = (C + kVec - 1) / kVec;
  float* sdw = smem + static_cast<size_t>(warp) * 2 * kVec * C8;  // (8, C8)
  float* sdb = sdw + kVec * C8;                                    // (8, C8)
  for (int i = lane; i < 2 * kVec * C8; i += kWarp) sdw[i] = 0.0f;
  __syncwarp();

  const int r0 = blockIdx.x * rows_per_block, r1 = min(N, r0 + rows_per_block);
  for (int row = r0 + warp; row < r1; row += warps) {
    const size_t off = static_cast<size_t>(row) * C;
    const float m = mean[row], rs = rstd[row];
    float sum_dnorm = 0.0f, sum_dnorm_norm = 0.0f;
    for (int c0 = lane * kVec; c0 < C; c0 += kWarp * kVec) {
      const int n = min(kVec, C - c0), q = c0 / kVec;
      float d[kVec] = {}, x[kVec] = {}, wv[kVec] = {};
      load_row8<kVecPath>(d, dout + off + c0, n);
      load_row8<kVecPath>(x, inp + off + c0, n);
      load_row8<kVecPath>(wv, w + c0, n);
#pragma unroll
      for (int k = 0; k < kVec; k++)
        if (k < n) {
          const float norm = (x[k] - m) * rs;
          const float dnorm = wv[k] * d[k];
          sum_dnorm += dnorm;
          sum_dnorm_norm += dnorm * norm;
          sdw[k * C8 + q] += d[k] * norm;
          sdb[k * C8 + q] += d[k];
        }
    }
    const float a = warp_sum(sum_dnorm) / C;
    const float qn = warp_sum(sum_dnorm_norm) / C;
    for (int c0 = lane * kVec; c0 < C; c0 += kWarp * kVec) {
      const int n = min(kVec, C - c0);
      float d[kVec] = {}, x[kVec] = {}, wv[kVec] = {}, g[kVec] = {};
      load_row8<kVecPath>(d, dout + off + c0, n);  // the warp's own loads of a moment ago: L1
      load_row8<kVecPath>(x, inp + off + c0, n);
      load_row8<kVecPath>(wv, w + c0, n);
      if constexpr (kAccumulate) load_row8<kVecPath>(g, dinp + off + c0, n);
#pragma unroll
      for (int k = 0; k < kVec; k++) {
        const float norm = (x[k] - m) * rs;
        const float dx = (wv[k] * d[k] - a - norm * qn) * rs;
        g[k] = kAccumulate ? g[k] + dx : dx;
      }
      store_row8<kVecPath>(dinp + off + c0, g, n);
    }
  }
  __syncthreads();
  // This block's partials: the warps' slices added in warp order.
  float* part = partials + static_cast<size_t>(blockIdx.x) * 2 * C;  // (2, C)
  for (int i = threadIdx.x; i < 2 * kVec * C8; i += blockDim.x) {
    const int which = i / (kVec * C8), k = (i / C8) % kVec, q = i % C8;
    const int c = q * kVec + k;
    if (c >= C) continue;
    float s = 0.0f;
    for (int v = 0; v < warps; v++) s += smem[static_cast<size_t>(v) * 2 * kVec * C8 + i];
    part[static_cast<size_t>(which) * C + c] = s;
  }
}

// Kernel 2: dw[c] += sum over blocks of partials[block][0][c], db likewise with [1]; blockIdx.y picks dw or
// db. Thread (tx, ty) adds blocks ty, ty + kReduceRows, ... in order; then row 0 adds the kReduceRows sums
// in order.
__global__ void layernorm_backward_reduce_kernel(float* dw, float* db, const float* partials, int C, int blocks) {
  __shared__ float s[kReduceRows][kWarp];
  const int tx = threadIdx.x, ty = threadIdx.y, which = blockIdx.y;
  const int c = blockIdx.x * kWarp + tx;
  float t = 0.0f;
  if (c < C)
    for (int b = ty; b < blocks; b += kReduceRows) t += partials[(static_cast<size_t>(b) * 2 + which) * C + c];
  s[ty][tx] = t;
  __syncthreads();
  if (ty == 0 && c < C) {
    float sum = 0.0f;
    for (int k = 0; k < kReduceRows; k++) sum += s[k][tx];
    (which == 0 ? dw : db)[c] += sum;
  }
}

template <bool kAccumulate, bool kVecPath>
void launch_backward(bf16* dinp, float* dw, float* db, const bf16* dout, const bf16* inp, const bf16* w,
                     const float* mean, const float* rstd, int N, int C, void* scratch, cudaStream_t stream) {
  GPT_CHECK(N > 0 && C > 0, "cuda layernorm_backward: needs N > 0 rows of C > 0 channels, got N=", N, " C=", C);
  const size_t per_warp = static_cast<size_t>(2) * kVec * ceil_div(C, kVec) * sizeof(float);
  const int warps = static_cast<int>(std::min<size_t>(kBwdWarps, shared_memory_optin_limit() / per_warp));
  GPT_CHECK(warps >= 1, "cuda layernorm_backward: C=", C, " needs ", per_warp,
            " bytes of shared memory per warp, more than this GPU allows a block (", shared_memory_optin_limit(), ")");
  const size_t smem = per_warp * warps;
  auto kernel = layernorm_backward_rows_kernel<kAccumulate, kVecPath>;
  allow_dynamic_shared(kernel, smem);
  const int blocks = static_cast<int>(std::min<size_t>(kBlocks, ceil_div(N, kBwdWarps)));
  const int rows_per_block = static_cast<int>(ceil_div(N, blocks));
  float* partials = static_cast<float*>(scratch);  // (blocks, 2, C)
  GPT_LAUNCH(kernel, blocks, warps * kWarp, smem, stream, dinp, partials, dout, inp, w, mean, rstd, N, C,
             rows_per_block);
  const dim3 grid(static_cast<unsigned>(ceil_div(C, kWarp)), 2);
  GPT_LAUNCH(layernorm_backward_reduce_kernel, grid, dim3(kWarp, kReduceRows), 0, stream, dw, db, partials, C, blocks);
}

bool rows_aligned(int C, std::initializer_list<const void*> ptrs) {
  if (C % kVec != 0) return false;
  for (const void* p : ptrs)
    if (p && !aligned16(p)) return false;
  return true;
}

template <bool kResidual>
void launch_forward(bf16* res, bf16* out, float* mean, float* rstd, const bf16* a, const bf16* b, const bf16* w,
                    const bf16* bias, int N, int C, cudaStream_t stream) {
  const unsigned blocks = static_cast<unsigned>(ceil_div(N, kRowsPerBlock));
  const int threads = kRowsPerBlock * kWarp;
  if (rows_aligned(C, {res, out, a, b, w, bias}))
    GPT_LAUNCH(layernorm_forward_kernel<kResidual, true>, blocks, threads, 0, stream, res, out, mean, rstd, a, b, w,
               bias, N, C);
  else
    GPT_LAUNCH(layernorm_forward_kernel<kResidual, false>, blocks, threads, 0, stream, res, out, mean, rstd, a, b, w,
               bias, N, C);
}

}  // namespace

void layernorm_forward(bf16* out, float* mean, float* rstd, const bf16* inp, const bf16* w, const bf16* b,
                       int N, int C, cudaStream_t stream) {
  if (N == 0) return;
  launch_forward<false>(nullptr, out, mean, rstd, inp, nullptr, w, b, N, C, stream);
}

void residual_layernorm_forward(bf16* res, bf16* out, float* mean, float* rstd, const bf16* a, const bf16* b,
                                const bf16* w, const bf16* bias, int N, int C, cudaStream_t stream) {
  if (N == 0) return;
  launch_forward<true>(res, out, mean, rstd, a, b, w, bias, N, C, stream);
}

void layernorm_backward(bf16* dinp, float* dw, float* db, const bf16* dout, const bf16* inp, const bf16* w,
                        const float* mean, const float* rstd, int N, int C, void* scratch, cudaStream_t stream) {
  if (N == 0) return;
  if (rows_aligned(C, {dinp, dout, inp, w}))
    launch_backward<false, true>(dinp, dw, db, dout, inp, w, mean, rstd, N, C, scratch, stream);
  else
    launch_backward<false, false>(dinp, dw, db, dout, inp, w, mean, rstd, N, C, scratch, stream);
}

void layernorm_backward_residual(bf16* dres, float* dw, float* db, const bf16* dout, const bf16* inp, const bf16* w,
                                 const float* mean, const float* rstd, int N, int C, void* scratch,
                                 cudaStream_t stream) {
  if (N == 0) return;
  if (rows_aligned(C, {dres, dout, inp, w}))
    launch_backward<true, true>(dres, dw, db, dout, inp, w, mean, rstd, N, C, scratch, stream);
  else
    launch_backward<true, false>(dres, dw, db, dout, inp, w, mean, rstd, N, C, scratch, stream);
}

}  // namespace gpt::cuda
