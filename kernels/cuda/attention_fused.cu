// The fused (flash-style) path of causal self-attention on the GPU: the second implementation of the
// attention op of kernels/cuda/attention.cu (whose batched-product path stays the reference and the
// fallback). It never materialises the (T,T) matrices in global memory: forward keeps one number per row,
// the log-sum-exp of the scaled scores, and backward recomputes the probabilities tile by tile from it.
//
// Tiles: 64 query rows x 64 keys, head size HS in {32, 64}; a block of 4 warps, each warp owning 16 rows
// of every (64, *) tile. Products run on tensor cores through WMMA (bf16 operands, fp32 accumulators) on
// shared-memory tiles; every elementwise step is fp32. With scale s = 1/sqrt(HS) and causal keys j <= i:
//   forward (grid: query tile x head), online softmax over the key tiles 0..qt:
//     S = s q k^T; m' = max(m, rowmax S); P~ = exp(S - m') (rounded to bf16 for the product);
//     l = l e^(m-m') + rowsum P~; O = O e^(m-m') + P~ v;  finally y = O / l, lse = m + log l.
//   backward, D_i = sum_d dy_id y_id (the softmax-gradient row term, from the bf16 output), then
//     P = exp(s q k^T - lse) (bf16), dP = dy v^T, dS = P (dP - D) (bf16), and
//     kernel "dkdv" (grid: key tile x head) sums dv = P^T dy and dk = s dS^T q over query tiles qt >= kt;
//     kernel "dq"   (grid: query tile x head) sums dq = s dS k over key tiles kt <= qt.
//   Two kernels instead of atomics: every gradient element is summed in one fixed order (deterministic).
// Global memory: tiles are read and the gradients written 16 bytes per access where the buffers are 16-byte
// aligned (one instance of each kernel per access width, with the same results); the output rows of the
// forward are written one element per lane.
// State (B,NH,T) fp32: lse. Scratch (B,NH,T) fp32: D.
#include <mma.h>

#include <cmath>
#include <type_traits>

#include "kernels/attention_rules.h"
#include "kernels/cuda/ops.cuh"

namespace gpt::cuda {
namespace {

namespace wmma = nvcuda::wmma;

constexpr int kTile = 64;                // query rows and key rows per tile
constexpr int kWarps = 4;                // warp w owns rows [16w, 16w + 16) of every tile
constexpr int kThreads = kWarps * kWarp;
constexpr int kF = 16;                   // WMMA fragment edge
constexpr int kLdT = kTile + 8;          // leading dim of bf16 (64,64) tiles (P, dS); +8 spreads banks
constexpr int kLdS = kTile + 4;          // leading dim of the fp32 (64,64) tile (S, then dP)

template <int HS>
struct Dims {
  static_assert(HS % kF == 0, "head size must be a multiple of 16");
  static constexpr int kLdH = HS + 8;  // bf16 (64, HS) tiles: q, k, v, dy
  static constexpr int kLdO = HS + 4;  // fp32 (64, HS) tiles: O, dq, dk, dv accumulators
  static constexpr size_t kHalfTile = size_t{kTile} * kLdH * sizeof(bf16);
  static constexpr size_t kFloatTile = size_t{kTile} * kLdO * sizeof(float);
  static constexpr size_t kScores = size_t{kTile} * kLdS * sizeof(float);
  static constexpr size_t kProbs = size_t{kTile} * kLdT * sizeof(bf16);
  static constexpr size_t kRows = size_t{kTile} * sizeof(float);
};

// Bump allocator over dynamic shared memory; every piece starts 128-byte aligned (WMMA needs 32).
struct Carver {
  unsigned char* p;
  template <typename X>
  __device__ X* take(size_t bytes) {
    X* x = reinterpret_cast<X*>(p);
    p += (bytes + 127) & ~size_t{127};
    return x;
  }
};
constexpr size_t carved(size_t bytes) { return (bytes + 127) & ~size_t{127}; }

// Where one (batch, head) lives: its q columns in qkv (B,T,3C) (k at +C, v at +2C, row stride 3C), its
// columns in a (B,T,C) tensor (dy, y), and the same q columns in dqkv.
struct HeadSlices {
  int C;
  size_t stride;  // 3C
  size_t qkv;     // offset of (b, t=0, q, h, d=0) in (B,T,3C) tensors
  size_t narrow;  // offset of (b, t=0, h, d=0) in (B,T,C) tensors
};
__device__ HeadSlices head_slices(int bh, int T, int NH, int HS) {
  const int b = bh / NH, h = bh % NH, C = NH * HS;
  const size_t stride = 3 * static_cast<size_t>(C), head = static_cast<size_t>(h) * HS;
  return {C, stride, static_cast<size_t>(b) * T * stride + head, static_cast<size_t>(b) * T * C + head};
}

// dst (64, HS) <- rows t0.. of a (T, *) head slice at `src` with row stride `stride`; rows >= T are zero.
// With kVecPath (the global buffers 16-byte aligned; rows stay aligned because HS and stride are multiples of
// 8, and so are the shared tile's kLdH and 128-byte carved base) 8 elements per access, else one by one:
// a copy either way, so the two agree bit for bit.
template <int HS, bool kVecPath>
__device__ void load_tile(bf16* dst, const bf16* src, size_t stride, int t0, int T) {
  if constexpr (kVecPath) {
    constexpr int kRowVecs = HS / kVec;
    for (int i = threadIdx.x; i < kTile * kRowVecs; i += kThreads) {
      const int r = i / kRowVecs, d = (i % kRowVecs) * kVec, t = t0 + r;
      const uint4 x = t < T ? *reinterpret_cast<const uint4*>(src + static_cast<size_t>(t) * stride + d)
                            : make_uint4(0u, 0u, 0u, 0u);  // bf16 zero is all-zero bits
      *reinterpret_cast<uint4*>(dst + r * Dims<HS>::kLdH + d) = x;
    }
  } else {
    for (int i = threadIdx.x; i < kTile * HS; i += kThreads) {
      const int r = i / HS, d = i % HS, t = t0 + r;
      dst[r * Dims<HS>::kLdH + d] = t < T ? src[static_cast<size_t>(t) * stride + d] : to_bf16(0.0f);
    }
  }
}

// dst (64) <- v[t0 + r] for rows < T, else 0.
__device__ void load_rows(float* dst, const float* v, int t0, int T) {
  for (int r = threadIdx.x; r < kTile; r += kThreads) dst[r] = t0 + r < T ? v[t0 + r] : 0.0f;
}

template <int HS>
__device__ void zero_accumulator(float* acc) {
  for (int i = threadIdx.x; i < kTile * Dims<HS>::kLdO; i += kThreads) acc[i] = 0.0f;
}

// One warp: C (16, 16*NT) (+)= A (16, 16*KT) @ B (16*KT, 16*NT), operands bf16 in shared memory, C fp32
// row-major in shared memory. A row_major: A(m,k) = a[m*lda + k]; col_major: A(m,k) = a[k*lda + m].
// B row_major: B(k,n) = b[k*ldb + n]; col_major: B(k,n) = b[n*ldb + k].
template <typename LA, typename LB, int KT, int NT>
__device__ void warp_gemm(float* c, int ldc, bool accumulate, const bf16* a, int lda, const bf16* b, int ldb) {
  constexpr bool a_rows = std::is_same<LA, wmma::row_major>::value;
  constexpr bool b_rows = std::is_same<LB, wmma::row_major>::value;
  for (int n = 0; n < NT; n++) {
    wmma::fragment<wmma::accumulator, kF, kF, kF, float> acc;
    if (accumulate) {
      wmma::load_matrix_sync(acc, c + n * kF, ldc, wmma::mem_row_major);
    } else {
      wmma::fill_fragment(acc, 0.0f);
    }
    for (int k = 0; k < KT; k++) {
      wmma::fragment<wmma::matrix_a, kF, kF, kF, bf16, LA> fa;
      wmma::fragment<wmma::matrix_b, kF, kF, kF, bf16, LB> fb;
      wmma::load_matrix_sync(fa, a_rows ? a + k * kF : a + static_cast<size_t>(k) * kF * lda, lda);
      wmma::load_matrix_sync(fb, b_rows ? b + static_cast<size_t>(k) * kF * ldb + n * kF
                                        : b + static_cast<size_t>(n) * kF * ldb + k * kF,
                             ldb);
      wmma::mma_sync(acc, fa, fb, acc);
    }
    wmma::store_matrix_sync(c + n * kF, acc, ldc, wmma::mem_row_major);
  }
}

// ---- forward ------------------------------------------------------------------------------------

template <int HS>
size_t forward_smem_bytes() {
  using D = Dims<HS>;
  return 3 * carved(D::kHalfTile) + carved(D::kScores) + carved(D::kProbs) + carved(D::kFloatTile);
}

// The online-softmax step for the warp's 16 rows of the current key tile: S (scaled, masked) -> P~ (bf16),
// O rows rescaled; the running max m and sum l of row r0 + r live in lane r's registers.
template <int HS>
__device__ void online_softmax_rows(bf16* P, float* O, const float* S, float scale, int r0, int q0, int k0,
                                    float& m_lane, float& l_lane) {
  const int lane = threadIdx.x % kWarp;
  for (int r = 0; r < kF; r++) {
    const int row = r0 + r, qi = q0 + row;
    const float m_old = __shfl_sync(0xffffffffu, m_lane, r);
    float x[kTile / kWarp];
    float mx = -INFINITY;
    for (int c = 0; c < kTile / kWarp; c++) {
      const int j = lane + c * kWarp;
      x[c] = k0 + j <= qi ? S[row * kLdS + j] * scale : -INFINITY;
      mx = fmaxf(mx, x[c]);
    }
    const float m_new = fmaxf(m_old, warp_max(mx));  // finite: key 0 is in every row's first tile
    float sum = 0.0f;
    for (int c = 0; c < kTile / kWarp; c++) {
      const float p = x[c] == -INFINITY ? 0.0f : expf(x[c] - m_new);
      sum += p;
      P[row * kLdT + lane + c * kWarp] = to_bf16(p);
    }
    sum = warp_sum(sum);
    const float alpha = expf(m_old - m_new);  // 0 on the first tile (m_old = -inf)
    for (int d = lane; d < HS; d += kWarp) O[row * Dims<HS>::kLdO + d] *= alpha;
    if (lane == r) {
      l_lane = l_lane * alpha + sum;
      m_lane = m_new;
    }
  }
}

template <int HS, bool kVecPath>
__global__ void __launch_bounds__(kThreads)
    fused_forward_kernel(bf16* out, float* lse, const bf16* qkv, int T, int NH, float scale) {
  using D = Dims<HS>;
  GPT_DYNAMIC_SHARED(unsigned char, smem);
  Carver cv{smem};
  bf16* q = cv.take<bf16>(D::kHalfTile);    // (64, HS)
  bf16* k = cv.take<bf16>(D::kHalfTile);    // (64, HS)
  bf16* v = cv.take<bf16>(D::kHalfTile);    // (64, HS)
  float* S = cv.take<float>(D::kScores);    // (64, 64)
  bf16* P = cv.take<bf16>(D::kProbs);       // (64, 64)
  float* O = cv.take<float>(D::kFloatTile); // (64, HS)

  const int qt = gridDim.x - 1 - blockIdx.x;  // the longest rows first: better tail balance
  const int bh = blockIdx.y, q0 = qt * kTile;
  const HeadSlices hs = head_slices(bh, T, NH, HS);
  const int C = hs.C;
  const size_t stride = hs.stride;
  const bf16* base = qkv + hs.qkv;
  const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp, r0 = warp * kF;

  load_tile<HS, kVecPath>(q, base, stride, q0, T);
  zero_accumulator<HS>(O);
  float m_lane = -INFINITY, l_lane = 0.0f;  // lane r < 16: row r0 + r
  for (int kt = 0; kt <= qt; kt++) {
    load_tile<HS, kVecPath>(k, base + C, stride, kt * kTile, T);
    load_tile<HS, kVecPath>(v, base + 2 * C, stride, kt * kTile, T);
    __syncthreads();
    warp_gemm<wmma::row_major, wmma::col_major, HS / kF, kTile / kF>(S + r0 * kLdS, kLdS, false,
                                                                     q + r0 * D::kLdH, D::kLdH, k, D::kLdH);
    __syncwarp();
    online_softmax_rows<HS>(P, O, S, scale, r0, q0, kt * kTile, m_lane, l_lane);
    __syncwarp();
    warp_gemm<wmma::row_major, wmma::row_major, kTile / kF, HS / kF>(O + r0 * D::kLdO, D::kLdO, true,
                                                                     P + r0 * kLdT, kLdT, v, D::kLdH);
    __syncwarp();
    __syncthreads();  // every warp is done with k and v before the next tile overwrites them
  }
  for (int r = 0; r < kF; r++) {
    const float l = __shfl_sync(0xffffffffu, l_lane, r), m = __shfl_sync(0xffffffffu, m_lane, r);
    const int row = r0 + r, t = q0 + row;
    if (t >= T) continue;  // uniform per warp
    bf16* y = out + hs.narrow + static_cast<size_t>(t) * C;
    const float inv = 1.0f / l;
    for (int d = lane; d < HS; d += kWarp) y[d] = to_bf16(O[row * D::kLdO + d] * inv);
    if (lane == 0) lse[static_cast<size_t>(bh) * T + t] = m + logf(l);
  }
}

// ---- backward -----------------------------------------------------------------------------------

// D[bh, t] = sum_d dy[b,t,h,d] * y[b,t,h,d], HS in {32, 64}: a row (b, t, h) is HS/8 lanes' work, 8 elements
// a lane (one 16-byte load of dy and one of y with kVecPath, else the same 8 one by one), then the lanes'
// sums are added by shuffles in a fixed order, so both paths give the same bits. Every lane reaches the
// shuffles (those past the last row add 0).
template <bool kVecPath>
__global__ void row_dot_kernel(float* Dv, const bf16* dout, const bf16* out, int B, int T, int NH, int HS) {
  const int lanes = HS / kVec;  // 4 or 8 lanes a row: a power of two, so a row's lanes share one warp
  const size_t rows = static_cast<size_t>(B) * T * NH;
  const size_t id = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const size_t w = id / lanes;  // the row, in (b, t, h) order: it starts at w * HS in (B, T, C)
  const int part = static_cast<int>(id % lanes);
  float s = 0.0f;
  if (w < rows) {
    float x[kVec] = {}, y[kVec] = {};
    const size_t off = w * HS + static_cast<size_t>(part) * kVec;
    load_row8<kVecPath>(x, dout + off, kVec);
    load_row8<kVecPath>(y, out + off, kVec);
#pragma unroll
    for (int k = 0; k < kVec; k++) s += x[k] * y[k];
  }
  for (int o = lanes / 2; o > 0; o /= 2) s += __shfl_xor_sync(0xffffffffu, s, o);
  if (w < rows && part == 0) {
    const size_t bt = w / NH, h = w % NH, b = bt / T, t = bt % T;
    Dv[(b * NH + h) * T + t] = s;
  }
}

// Both backward kernels' common step for the warp's 16 query rows of one (query tile, key tile) pair:
//   S = q k^T -> P = exp(s S - lse) masked (bf16); dP = dy v^T (into S); dS = P (dP - D) (bf16).
template <int HS>
__device__ void probs_and_dscores(bf16* P, bf16* dS, float* S, const bf16* q, const bf16* dy, const bf16* k,
                                  const bf16* v, const float* lse, const float* Dv, float scale, int r0, int q0,
                                  int k0, int T) {
  using Dm = Dims<HS>;
  const int lane = threadIdx.x % kWarp;
  warp_gemm<wmma::row_major, wmma::col_major, HS / kF, kTile / kF>(S + r0 * kLdS, kLdS, false, q + r0 * Dm::kLdH,
                                                                   Dm::kLdH, k, Dm::kLdH);
  __syncwarp();
  for (int r = 0; r < kF; r++) {
    const int row = r0 + r, qi = q0 + row;
    for (int j = lane; j < kTile; j += kWarp) {
      const bool keep = k0 + j <= qi && qi < T;
      P[row * kLdT + j] = to_bf16(keep ? expf(S[row * kLdS + j] * scale - lse[row]) : 0.0f);
    }
  }
  __syncwarp();
  warp_gemm<wmma::row_major, wmma::col_major, HS / kF, kTile / kF>(S + r0 * kLdS, kLdS, false, dy + r0 * Dm::kLdH,
                                                                   Dm::kLdH, v, Dm::kLdH);
  __syncwarp();
  for (int r = 0; r < kF; r++) {
    const int row = r0 + r;
    for (int j = lane; j < kTile; j += kWarp)
      dS[row * kLdT + j] = to_bf16(to_f32(P[row * kLdT + j]) * (S[row * kLdS + j] - Dv[row]));
  }
  __syncwarp();
}

// Shared memory of both backward kernels: four (64, HS) bf16 tiles, S, P, dS, two (64, HS) fp32
// accumulators (dk and dv; the dq kernel uses one), lse and D of the query rows.
template <int HS>
size_t backward_smem_bytes() {
  using D = Dims<HS>;
  return 4 * carved(D::kHalfTile) + carved(D::kScores) + 2 * carved(D::kProbs) + 2 * carved(D::kFloatTile) +
         2 * carved(D::kRows);
}

struct BackwardTiles {
  bf16 *q, *k, *v, *dy;  // (64, HS) each
  float* S;              // (64, 64)
  bf16 *P, *dS;          // (64, 64) each
  float *acc0, *acc1;    // (64, HS) each
  float *lse, *D;        // (64) each
};

template <int HS>
__device__ BackwardTiles carve_backward(unsigned char* smem) {
  using Dm = Dims<HS>;
  Carver cv{smem};
  BackwardTiles t;
  t.q = cv.take<bf16>(Dm::kHalfTile), t.k = cv.take<bf16>(Dm::kHalfTile);
  t.v = cv.take<bf16>(Dm::kHalfTile), t.dy = cv.take<bf16>(Dm::kHalfTile);
  t.S = cv.take<float>(Dm::kScores);
  t.P = cv.take<bf16>(Dm::kProbs), t.dS = cv.take<bf16>(Dm::kProbs);
  t.acc0 = cv.take<float>(Dm::kFloatTile), t.acc1 = cv.take<float>(Dm::kFloatTile);
  t.lse = cv.take<float>(Dm::kRows), t.D = cv.take<float>(Dm::kRows);
  return t;
}

// dst rows t0.. (< T) of a (T, *) head slice with row stride `stride` <- s * acc (64, HS), as bf16; with
// kVecPath (as load_tile) 8 elements per store, each rounded as to_bf16 rounds it. The vector store is
// __stwb (st.global.wb.v4: the default write-back policy, written out): in these kernels a plain uint4
// store came out of nvcc 13 as four 32-bit stores.
template <int HS, bool kVecPath>
__device__ void store_rows(bf16* dst, size_t stride, const float* acc, float s, int t0, int T) {
  if constexpr (kVecPath) {
    constexpr int kRowVecs = HS / kVec;
    for (int i = threadIdx.x; i < kTile * kRowVecs; i += kThreads) {
      const int r = i / kRowVecs, d = (i % kRowVecs) * kVec, t = t0 + r;
      if (t >= T) continue;
      uint32_t w[kVec / 2];
#pragma unroll
      for (int k = 0; k < kVec / 2; k++) {
        const float* a = acc + r * Dims<HS>::kLdO + d + 2 * k;
        const __nv_bfloat162 h = __floats2bfloat162_rn(s * a[0], s * a[1]);
        w[k] = *reinterpret_cast<const uint32_t*>(&h);
      }
      uint4* to = reinterpret_cast<uint4*>(dst + static_cast<size_t>(t) * stride + d);
      __stwb(to, make_uint4(w[0], w[1], w[2], w[3]));
    }
  } else {
    for (int i = threadIdx.x; i < kTile * HS; i += kThreads) {
      const int r = i / HS, d = i % HS, t = t0 + r;
      if (t < T) dst[static_cast<size_t>(t) * stride + d] = to_bf16(s * acc[r * Dims<HS>::kLdO + d]);
    }
  }
}

template <int HS, bool kVecPath>
__global__ void __launch_bounds__(kThreads)
    fused_backward_dkdv_kernel(bf16* dqkv, const bf16* dout, const bf16* qkv, const float* lse, const float* Dv,
                               int T, int NH, float scale) {
  using Dm = Dims<HS>;
  GPT_DYNAMIC_SHARED(unsigned char, smem);
  const BackwardTiles s = carve_backward<HS>(smem);
  const int kt = blockIdx.x, bh = blockIdx.y, k0 = kt * kTile;
  const HeadSlices hs = head_slices(bh, T, NH, HS);
  const int C = hs.C;
  const size_t stride = hs.stride;
  const bf16* base = qkv + hs.qkv;
  const bf16* dy_base = dout + hs.narrow;
  const int r0 = (threadIdx.x / kWarp) * kF, tiles = (T + kTile - 1) / kTile;

  load_tile<HS, kVecPath>(s.k, base + C, stride, k0, T);
  load_tile<HS, kVecPath>(s.v, base + 2 * C, stride, k0, T);
  zero_accumulator<HS>(s.acc0);  // dk
  zero_accumulator<HS>(s.acc1);  // dv
  for (int qt = kt; qt < tiles; qt++) {
    const int q0 = qt * kTile;
    load_tile<HS, kVecPath>(s.q, base, stride, q0, T);
    load_tile<HS, kVecPath>(s.dy, dy_base, C, q0, T);
    load_rows(s.lse, lse + static_cast<size_t>(bh) * T, q0, T);
    load_rows(s.D, Dv + static_cast<size_t>(bh) * T, q0, T);
    __syncthreads();
    probs_and_dscores<HS>(s.P, s.dS, s.S, s.q, s.dy, s.k, s.v, s.lse, s.D, scale, r0, q0, k0, T);
    __syncthreads();  // P and dS of every query row are needed for this warp's key rows
    // dv (keys r0.., HS) += P^T dy;  dk (keys r0.., HS) += dS^T q
    warp_gemm<wmma::col_major, wmma::row_major, kTile / kF, HS / kF>(s.acc1 + r0 * Dm::kLdO, Dm::kLdO, true,
                                                                     s.P + r0, kLdT, s.dy, Dm::kLdH);
    warp_gemm<wmma::col_major, wmma::row_major, kTile / kF, HS / kF>(s.acc0 + r0 * Dm::kLdO, Dm::kLdO, true,
                                                                     s.dS + r0, kLdT, s.q, Dm::kLdH);
    __syncthreads();  // before the next query tile overwrites q, dy, P and dS
  }
  bf16* dbase = dqkv + hs.qkv;
  store_rows<HS, kVecPath>(dbase + C, stride, s.acc0, scale, k0, T);
  store_rows<HS, kVecPath>(dbase + 2 * C, stride, s.acc1, 1.0f, k0, T);
}

template <int HS, bool kVecPath>
__global__ void __launch_bounds__(kThreads)
    fused_backward_dq_kernel(bf16* dqkv, const bf16* dout, const bf16* qkv, const float* lse, const float* Dv,
                             int T, int NH, float scale) {
  using Dm = Dims<HS>;
  GPT_DYNAMIC_SHARED(unsigned char, smem);
  const BackwardTiles s = carve_backward<HS>(smem);
  const int qt = gridDim.x - 1 - blockIdx.x;
  const int bh = blockIdx.y, q0 = qt * kTile;
  const HeadSlices hs = head_slices(bh, T, NH, HS);
  const int C = hs.C;
  const size_t stride = hs.stride;
  const bf16* base = qkv + hs.qkv;
  const int r0 = (threadIdx.x / kWarp) * kF;

  load_tile<HS, kVecPath>(s.q, base, stride, q0, T);
  load_tile<HS, kVecPath>(s.dy, dout + hs.narrow, C, q0, T);
  load_rows(s.lse, lse + static_cast<size_t>(bh) * T, q0, T);
  load_rows(s.D, Dv + static_cast<size_t>(bh) * T, q0, T);
  zero_accumulator<HS>(s.acc0);  // dq
  for (int kt = 0; kt <= qt; kt++) {
    load_tile<HS, kVecPath>(s.k, base + C, stride, kt * kTile, T);
    load_tile<HS, kVecPath>(s.v, base + 2 * C, stride, kt * kTile, T);
    __syncthreads();
    probs_and_dscores<HS>(s.P, s.dS, s.S, s.q, s.dy, s.k, s.v, s.lse, s.D, scale, r0, q0, kt * kTile, T);
    // dq (queries r0.., HS) += dS k: only this warp's rows of dS are read
    warp_gemm<wmma::row_major, wmma::row_major, kTile / kF, HS / kF>(s.acc0 + r0 * Dm::kLdO, Dm::kLdO, true,
                                                                     s.dS + r0 * kLdT, kLdT, s.k, Dm::kLdH);
    __syncthreads();  // before the next key tile overwrites k and v
  }
  store_rows<HS, kVecPath>(dqkv + hs.qkv, stride, s.acc0, scale, q0, T);
}

// Lets a kernel launch with `bytes` of dynamic shared memory, after checking the device has them.
template <typename Kernel>
void allow_smem(Kernel kernel, size_t bytes) {
  const int optin = shared_memory_optin_limit();
  GPT_CHECK(bytes <= static_cast<size_t>(optin), "--attention fused: needs ", bytes,
            " bytes of shared memory per block, this GPU allows ", optin, " (use --attention simple)");
  allow_dynamic_shared(kernel, bytes);
}

dim3 tile_grid(int B, int T, int NH) {
  const size_t heads = static_cast<size_t>(B) * NH;
  GPT_CHECK(heads <= 65535, "--attention fused: batch x heads ", heads, " exceeds the grid limit 65535");
  return dim3(static_cast<unsigned>(ceil_div(T, kTile)), static_cast<unsigned>(heads));
}

// One instance per head size and access width: the vector path where the kernel's global buffers are
// 16-byte aligned, else the one-element path (the same results; a run-time branch inside one kernel would
// cost registers and spills).
template <int HS, bool kVecPath>
void forward_hs(bf16* out, float* lse, const bf16* qkv, int B, int T, int NH, cudaStream_t stream) {
  const size_t smem = forward_smem_bytes<HS>();
  allow_smem(fused_forward_kernel<HS, kVecPath>, smem);
  const float scale = 1.0f / std::sqrt(static_cast<float>(HS));
  GPT_LAUNCH(fused_forward_kernel<HS, kVecPath>, tile_grid(B, T, NH), kThreads, smem, stream, out, lse, qkv, T, NH,
             scale);
}

template <int HS, bool kVecPath>
void backward_hs(bf16* dqkv, const bf16* dout, const bf16* qkv, const float* lse, const float* Dv, int B, int T,
                 int NH, cudaStream_t stream) {
  const size_t smem = backward_smem_bytes<HS>();
  allow_smem(fused_backward_dkdv_kernel<HS, kVecPath>, smem);
  allow_smem(fused_backward_dq_kernel<HS, kVecPath>, smem);
  const float scale = 1.0f / std::sqrt(static_cast<float>(HS));
  const dim3 grid = tile_grid(B, T, NH);
  GPT_LAUNCH(fused_backward_dkdv_kernel<HS, kVecPath>, grid, kThreads, smem, stream, dqkv, dout, qkv, lse, Dv, T, NH,
             scale);
  GPT_LAUNCH(fused_backward_dq_kernel<HS, kVecPath>, grid, kThreads, smem, stream, dqkv, dout, qkv, lse, Dv, T, NH,
             scale);
}

template <int HS>
void forward_hs(bf16* out, float* lse, const bf16* qkv, int B, int T, int NH, cudaStream_t stream) {
  if (aligned16(qkv))  // the tiles' global reads (the output rows are written one by one)
    forward_hs<HS, true>(out, lse, qkv, B, T, NH, stream);
  else
    forward_hs<HS, false>(out, lse, qkv, B, T, NH, stream);
}

template <int HS>
void backward_hs(bf16* dqkv, const bf16* dout, const bf16* qkv, const float* lse, const float* Dv, int B, int T,
                 int NH, cudaStream_t stream) {
  if (aligned16(qkv) && aligned16(dout) && aligned16(dqkv))
    backward_hs<HS, true>(dqkv, dout, qkv, lse, Dv, B, T, NH, stream);
  else
    backward_hs<HS, false>(dqkv, dout, qkv, lse, Dv, B, T, NH, stream);
}

int head_size(int C, int NH) {
  check_fused_attention_heads(C, NH);
  return C / NH;
}

}  // namespace

void fused_attention_forward(bf16* out, float* lse, const bf16* qkv, int B, int T, int C, int NH,
                             cudaStream_t stream) {
  const int hs = head_size(C, NH);
  if (B == 0 || T == 0) return;
  if (hs == 32) forward_hs<32>(out, lse, qkv, B, T, NH, stream);
  if (hs == 64) forward_hs<64>(out, lse, qkv, B, T, NH, stream);
}

void fused_attention_backward(bf16* dqkv, const bf16* dout, const bf16* qkv, const bf16* out, const float* lse,
                              int B, int T, int C, int NH, void* scratch, cudaStream_t stream) {
  const int hs = head_size(C, NH);
  if (B == 0 || T == 0) return;
  float* Dv = static_cast<float*>(scratch);  // (B, NH, T)
  const size_t threads = static_cast<size_t>(B) * T * NH * (hs / kVec);  // hs / 8 lanes a row
  const unsigned blocks = static_cast<unsigned>(ceil_div(threads, 256));
  if (aligned16(dout) && aligned16(out))
    GPT_LAUNCH(row_dot_kernel<true>, blocks, 256, 0, stream, Dv, dout, out, B, T, NH, hs);
  else
    GPT_LAUNCH(row_dot_kernel<false>, blocks, 256, 0, stream, Dv, dout, out, B, T, NH, hs);
  if (hs == 32) backward_hs<32>(dqkv, dout, qkv, lse, Dv, B, T, NH, stream);
  if (hs == 64) backward_hs<64>(dqkv, dout, qkv, lse, Dv, B, T, NH, stream);
}

}  // namespace gpt::cuda
