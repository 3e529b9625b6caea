// Causal multi-head self-attention on the GPU (twin of kernels/cpu/attention.cpp): the plain path of
// batched products and a row softmax, written to be obviously right before fast.
//
// Per (batch b, head h), with q, k, v the (T, hs) slices of qkv (B,T,3C) = (B,T,3,NH,hs), scale 1/sqrt(hs):
//   S = scale * q k^T      (T,T) fp32    batched cuBLASLt product, bf16 operands, fp32 output
//   P = causal_softmax(S)  (T,T) bf16    fp32 math; P[i,j] = 0 for j > i; P is the saved state
//   y = P v                (T,hs) bf16   batched product
// Backward, from dy (the head slices of dout):
//   dP = dy v^T (fp32)   dS = P * (dP - rowsum(P * dP)) (bf16)   dv = P^T dy
//   dq = scale * dS k     dk = scale * dS^T q
// The state is P in bf16 (B,NH,T,T): exactly the matrix forward multiplied with v, so backward
// differentiates the function forward computed. Scratch holds the head-major copies of q, k, v, dy and
// the (T,T) temporaries; it is reused by every layer.
// Sampling's op (attention_cached_forward, bottom of the file) attends one query per block over a key/value
// cache, with a running max and sum over tiles of keys, so no (T,T) matrix and no scratch.
#include <cmath>

#include "kernels/cuda/ops.cuh"

namespace gpt::cuda {
namespace {

constexpr int kRowsPerBlock = 8;  // warps per block in the softmax kernels

// Element i of a (B,NH,T,hs) tensor -> its position in (B*T, stride) rows where head h owns columns
// [h*hs, (h+1)*hs): both layout kernels below walk the same index map, in opposite directions.
__device__ __forceinline__ size_t row_layout_index(size_t i, int stride, int T, int NH, int hs) {
  const int d = static_cast<int>(i % hs);
  const size_t bht = i / hs;
  const int t = static_cast<int>(bht % T);
  const size_t bh = bht / T;
  const int h = static_cast<int>(bh % NH);
  const size_t b = bh / NH;
  return (b * T + t) * stride + static_cast<size_t>(h) * hs + d;
}

// dst (B,NH,T,hs) <- src rows of `src_stride` elements: dst[b,h,t,d] = src[(b*T+t)*src_stride + h*hs + d].
__global__ void split_heads_kernel(bf16* dst, const bf16* src, int src_stride, int T, int NH, int hs,
                                   size_t total) {
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    dst[i] = src[row_layout_index(i, src_stride, T, NH, hs)];
  }
}

// The inverse: dst[(b*T+t)*dst_stride + h*hs + d] = src[b,h,t,d].
__global__ void merge_heads_kernel(bf16* dst, int dst_stride, const bf16* src, int T, int NH, int hs,
                                   size_t total) {
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    dst[row_layout_index(i, dst_stride, T, NH, hs)] = src[i];
  }
}

// One warp per row r of the (B*NH*T, T) matrices; the query position is i = r % T, keys j <= i are kept.
// Online max and sum in one pass (each lane over its own columns, then merged across lanes), then P.
__global__ void causal_softmax_kernel(bf16* P, const float* S, size_t rows, int T) {
  const int lane = threadIdx.x % kWarp;
  const size_t r = static_cast<size_t>(blockIdx.x) * kRowsPerBlock + threadIdx.x / kWarp;
  if (r >= rows) return;  // uniform per warp
  const int i = static_cast<int>(r % T);
  const float* s = S + r * T;
  float m = -INFINITY, sum = 0.0f;
  for (int j = lane; j <= i; j += kWarp) {
    const float x = s[j];
    if (x > m) {
      sum = sum * expf(m - x) + 1.0f;  // first element: 0 * exp(-inf) + 1
      m = x;
    } else {
      sum += expf(x - m);
    }
  }
  const float row_max = warp_max(m);                        // finite: column 0 is always kept
  const float row_sum = warp_sum(sum * expf(m - row_max));  // lanes with no column: 0 * 0
  const float inv = 1.0f / row_sum;
  bf16* p = P + r * T;
  for (int j = lane; j < T; j += kWarp) p[j] = to_bf16(j <= i ? expf(s[j] - row_max) * inv : 0.0f);
}

// dS[i,j] = P[i,j] * (dP[i,j] - sum_l P[i,l] dP[i,l]) for j <= i, 0 above the diagonal.
__global__ void causal_softmax_backward_kernel(bf16* dS, const bf16* P, const float* dP, size_t rows, int T) {
  const int lane = threadIdx.x % kWarp;
  const size_t r = static_cast<size_t>(blockIdx.x) * kRowsPerBlock + threadIdx.x / kWarp;
  if (r >= rows) return;
  const int i = static_cast<int>(r % T);
  const bf16* p = P + r * T;
  const float* dp = dP + r * T;
  float dot = 0.0f;
  for (int j = lane; j <= i; j += kWarp) dot += to_f32(p[j]) * dp[j];
  dot = warp_sum(dot);
  bf16* ds = dS + r * T;
  for (int j = lane; j < T; j += kWarp) ds[j] = to_bf16(j <= i ? to_f32(p[j]) * (dp[j] - dot) : 0.0f);
}

// Sub-buffers carved from scratch, each 256-byte aligned. Forward uses q, k, v, y (=dy slot) and att.
struct Buffers {
  bf16 *q, *k, *v, *dy, *dq, *dk, *dv;  // (B,NH,T,hs) each
  float* att;                           // (B,NH,T,T): S in forward, dP in backward
  bf16* dS;                             // (B,NH,T,T)
};

Buffers carve(void* scratch, int B, int T, int C, int NH) {
  const size_t heads = align_up(static_cast<size_t>(B) * T * C * sizeof(bf16));
  const size_t tt = static_cast<size_t>(B) * NH * T * T;
  char* p = static_cast<char*>(scratch);
  Buffers b{};
  bf16** hs_bufs[] = {&b.q, &b.k, &b.v, &b.dy, &b.dq, &b.dk, &b.dv};
  for (bf16** buf : hs_bufs) {
    *buf = reinterpret_cast<bf16*>(p);
    p += heads;
  }
  b.att = reinterpret_cast<float*>(p);
  p += align_up(tt * sizeof(float));
  b.dS = reinterpret_cast<bf16*>(p);
  return b;
}

void split(bf16* dst, const bf16* src, int src_stride, int B, int T, int NH, int hs, cudaStream_t stream) {
  const size_t total = static_cast<size_t>(B) * NH * T * hs;
  GPT_LAUNCH(split_heads_kernel, grid_for(total, 256), 256, 0, stream, dst, src, src_stride, T, NH, hs, total);
}

void merge(bf16* dst, int dst_stride, const bf16* src, int B, int T, int NH, int hs, cudaStream_t stream) {
  const size_t total = static_cast<size_t>(B) * NH * T * hs;
  GPT_LAUNCH(merge_heads_kernel, grid_for(total, 256), 256, 0, stream, dst, dst_stride, src, T, NH, hs, total);
}

// One batched product over the B*NH heads: C (M x N) = alpha * op(A) @ op(B), each operand either a
// (T,hs) head slice or a (T,T) matrix.
void head_gemm(const BlasContext& ctx, cudaStream_t stream, int BH, int M, int N, int K, const bf16* A, bool ta,
               int lda, long long sa, const bf16* Bm, bool tb, int ldb, long long sb, void* Cm, bool c_f32,
               int ldc, long long sc, float alpha) {
  GemmSpec g;
  g.M = M, g.N = N, g.K = K;
  g.A = A, g.trans_a = ta, g.lda = lda, g.stride_a = sa;
  g.B = Bm, g.trans_b = tb, g.ldb = ldb, g.stride_b = sb;
  g.C = Cm, g.c_f32 = c_f32, g.ldc = ldc, g.stride_c = sc;
  g.batch = BH;
  g.alpha = alpha;
  gemm(ctx, g, stream);
}

// What forward and backward share: the head sizes, and q, k, v split out of qkv (B,T,3C) into their
// (B,NH,T,hs) slots of scratch.
struct Heads {
  int hs, BH;      // channels per head, batched heads B*NH
  long long sh;    // stride between heads of a (T,hs) slot
  long long st;    // stride between heads of a (T,T) matrix
  float scale;     // 1/sqrt(hs)
  Buffers s;
};

Heads split_qkv(const bf16* qkv, int B, int T, int C, int NH, void* scratch, cudaStream_t stream) {
  Heads h;
  h.hs = C / NH;
  h.BH = B * NH;
  h.sh = static_cast<long long>(T) * h.hs;
  h.st = static_cast<long long>(T) * T;
  h.scale = 1.0f / std::sqrt(static_cast<float>(h.hs));
  h.s = carve(scratch, B, T, C, NH);
  split(h.s.q, qkv, 3 * C, B, T, NH, h.hs, stream);
  split(h.s.k, qkv + C, 3 * C, B, T, NH, h.hs, stream);
  split(h.s.v, qkv + 2 * C, 3 * C, B, T, NH, h.hs, stream);
  return h;
}

}  // namespace

void attention_forward(bf16* out, bf16* state, const bf16* qkv, int B, int T, int C, int NH,
                       const BlasContext& ctx, void* scratch, cudaStream_t stream) {
  GPT_CHECK(NH > 0 && C % NH == 0, "cuda attention: channels ", C, " not divisible by heads ", NH);
  if (B == 0 || T == 0) return;
  const Heads h = split_qkv(qkv, B, T, C, NH, scratch, stream);
  const int hs = h.hs, BH = h.BH;
  const long long sh = h.sh, st = h.st;
  const Buffers& s = h.s;
  // S = scale * q @ k^T
  head_gemm(ctx, stream, BH, T, T, hs, s.q, false, hs, sh, s.k, true, hs, sh, s.att, true, T, st, h.scale);
  const size_t rows = static_cast<size_t>(BH) * T;
  GPT_LAUNCH(causal_softmax_kernel, static_cast<unsigned>(ceil_div(rows, kRowsPerBlock)), kRowsPerBlock * kWarp, 0,
             stream, state, s.att, rows, T);
  // y = P @ v, kept in the dy slot, then back to (B,T,C)
  head_gemm(ctx, stream, BH, T, hs, T, state, false, T, st, s.v, false, hs, sh, s.dy, false, hs, sh, 1.0f);
  merge(out, C, s.dy, B, T, NH, hs, stream);
}

void attention_backward(bf16* dqkv, const bf16* dout, const bf16* qkv, const bf16* out, const bf16* state,
                        int B, int T, int C, int NH, const BlasContext& ctx, void* scratch,
                        cudaStream_t stream) {
  GPT_CHECK(NH > 0 && C % NH == 0, "cuda attention: channels ", C, " not divisible by heads ", NH);
  if (B == 0 || T == 0) return;
  const Heads h = split_qkv(qkv, B, T, C, NH, scratch, stream);
  const int hs = h.hs, BH = h.BH;
  const long long sh = h.sh, st = h.st;
  const Buffers& s = h.s;
  split(s.dy, dout, C, B, T, NH, hs, stream);
  // dP = dy @ v^T (fp32)
  head_gemm(ctx, stream, BH, T, T, hs, s.dy, false, hs, sh, s.v, true, hs, sh, s.att, true, T, st, 1.0f);
  const size_t rows = static_cast<size_t>(BH) * T;
  GPT_LAUNCH(causal_softmax_backward_kernel, static_cast<unsigned>(ceil_div(rows, kRowsPerBlock)),
             kRowsPerBlock * kWarp, 0, stream, s.dS, state, s.att, rows, T);
  // dv = P^T @ dy, dq = scale * dS @ k, dk = scale * dS^T @ q
  head_gemm(ctx, stream, BH, T, hs, T, state, true, T, st, s.dy, false, hs, sh, s.dv, false, hs, sh, 1.0f);
  head_gemm(ctx, stream, BH, T, hs, T, s.dS, false, T, st, s.k, false, hs, sh, s.dq, false, hs, sh, h.scale);
  head_gemm(ctx, stream, BH, T, hs, T, s.dS, true, T, st, s.q, false, hs, sh, s.dk, false, hs, sh, h.scale);
  merge(dqkv, 3 * C, s.dq, B, T, NH, hs, stream);
  merge(dqkv + C, 3 * C, s.dk, B, T, NH, hs, stream);
  merge(dqkv + 2 * C, 3 * C, s.dv, B, T, NH, hs, stream);
}

// ---- over a key/value cache (sampling) ------------------------------------------------------------
namespace {

constexpr int kCachedThreads = 128;  // keys per tile, one per thread; also the output columns per pass

// dst (B,NH,Tmax,hs) at positions past..past+Tn-1 <- the (B,Tn) rows of src (row stride 3C), head h in
// columns h*hs..h*hs+hs: one thread per element, i over (b, h, t, d).
__global__ void append_heads_kernel(bf16* dst, const bf16* src, int src_stride, int Tn, int past, int Tmax, int NH,
                                    int hs, size_t total) {
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    const size_t bht = i / hs, bh = bht / Tn;
    const int d = static_cast<int>(i % hs), t = static_cast<int>(bht % Tn);
    dst[(bh * Tmax + past + t) * hs + d] = src[row_layout_index(i, src_stride, Tn, NH, hs)];
  }
}

// Block (t, h, b): the query at position past + t of head h over keys 0..past+t, in tiles of kCachedThreads
// keys: thread j scores key k0 + j, the tile's max and sum update the running ones (every thread holds the
// same), and thread c accumulates output columns c, c + kCachedThreads, ... rescaled by exp(m_old - m_new).
// Dynamic shared memory: the query and the output accumulator, (hs) fp32 each (cached_attention_smem).
__global__ void __launch_bounds__(kCachedThreads) cached_attention_kernel(bf16* out, const bf16* qkv,
                                                                          const bf16* kcache, const bf16* vcache,
                                                                          int Tn, int past, int Tmax, int C, int NH,
                                                                          float scale) {
  GPT_DYNAMIC_SHARED(float, smem);
  __shared__ float p[kCachedThreads];  // (tile) exp(score - running max)
  __shared__ float red[kCachedThreads / kWarp];
  const int t = blockIdx.x, h = blockIdx.y, b = blockIdx.z, hs = C / NH, last = past + t;
  float* q = smem;         // (hs) the query, fp32
  float* acc = smem + hs;  // (hs) sum of exp(score - m) v over the keys so far; column d only by thread d % 128
  const size_t bh = static_cast<size_t>(b) * NH + h;
  const bf16* qrow = qkv + (static_cast<size_t>(b) * Tn + t) * 3 * C + static_cast<size_t>(h) * hs;
  for (int d = threadIdx.x; d < hs; d += kCachedThreads) q[d] = to_f32(qrow[d]), acc[d] = 0.0f;
  __syncthreads();
  const bf16* K = kcache + bh * Tmax * hs;  // (Tmax, hs)
  const bf16* V = vcache + bh * Tmax * hs;  // (Tmax, hs)
  float m = -INFINITY, l = 0.0f;
  for (int k0 = 0; k0 <= last; k0 += kCachedThreads) {
    const int j = k0 + static_cast<int>(threadIdx.x), n = min(kCachedThreads, last + 1 - k0);
    float s = -INFINITY;
    if (j <= last) {
      float dot = 0.0f;
      for (int d = 0; d < hs; d++) dot += q[d] * to_f32(K[static_cast<size_t>(j) * hs + d]);
      s = dot * scale;
    }
    const float m_new = fmaxf(m, block_max(s, red));  // finite: key k0 <= last is in the tile
    const float e = j <= last ? expf(s - m_new) : 0.0f;
    p[threadIdx.x] = e;
    const float corr = expf(m - m_new);  // 0 on the first tile (m = -inf)
    l = l * corr + block_sum(e, red);  // its barrier also publishes p
    for (int d = threadIdx.x; d < hs; d += kCachedThreads) {
      float a = acc[d] * corr;
      for (int jj = 0; jj < n; jj++) a += p[jj] * to_f32(V[static_cast<size_t>(k0 + jj) * hs + d]);
      acc[d] = a;
    }
    m = m_new;
    __syncthreads();  // p is rewritten by the next tile
  }
  bf16* o = out + (static_cast<size_t>(b) * Tn + t) * C + static_cast<size_t>(h) * hs;
  for (int d = threadIdx.x; d < hs; d += kCachedThreads) o[d] = to_bf16(acc[d] / l);
}

void append_heads(bf16* dst, const bf16* src, int B, int Tn, int past, int Tmax, int C, int NH, cudaStream_t stream) {
  const int hs = C / NH;
  const size_t total = static_cast<size_t>(B) * NH * Tn * hs;
  GPT_LAUNCH(append_heads_kernel, grid_for(total, 256), 256, 0, stream, dst, src, 3 * C, Tn, past, Tmax, NH, hs, total);
}

}  // namespace

void attention_cached_forward(bf16* out, bf16* kcache, bf16* vcache, const bf16* qkv, int B, int Tn, int past,
                              int Tmax, int C, int NH, cudaStream_t stream) {
  GPT_CHECK(NH > 0 && C % NH == 0, "cuda attention: channels ", C, " not divisible by heads ", NH);
  GPT_CHECK(B >= 1 && Tn >= 1 && past >= 0 && past <= Tmax - Tn, "cached attention: positions ", past, "..",
            (long long)past + Tn - 1, " do not fit a cache of ", Tmax);
  GPT_CHECK(C / NH <= kCachedAttentionMaxHs, "cuda cached attention (sampling): head size ", C / NH,
            " is above the largest its shared memory holds, ", kCachedAttentionMaxHs);
  GPT_CHECK(B <= 65535 && NH <= 65535, "cuda cached attention: B ", B, " or NH ", NH, " above the grid's 65535");
  append_heads(kcache, qkv + C, B, Tn, past, Tmax, C, NH, stream);
  append_heads(vcache, qkv + 2 * C, B, Tn, past, Tmax, C, NH, stream);
  const float scale = 1.0f / std::sqrt(static_cast<float>(C / NH));
  const size_t smem = 2 * sizeof(float) * (C / NH);  // q and acc
  GPT_LAUNCH(cached_attention_kernel, dim3(Tn, NH, B), kCachedThreads, smem, stream, out, qkv, kcache, vcache, Tn, past,
             Tmax, C, NH, scale);
}

}  // namespace gpt::cuda
