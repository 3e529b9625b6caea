// Token + position embedding on the GPU (twin of kernels/cpu/encoder.cpp).
//
// Forward: out[b,t,:] = wte[tokens[b,t],:] + wpe[t,:], summed in fp32, rounded once to bf16; 8 channels per
// thread with 16-byte accesses when C % 8 == 0 and the buffers are aligned, else one channel per thread.
//
// Backward, deterministic (no floating-point atomics), so a run repeats bit for bit:
//  - dwpe[t,:] += sum over b of dout[b,t,:], one thread per (t, 8 channels) adding b = 0..B-1 in order.
//  - dwte: the N = B*T positions are grouped by token with a counting sort that has no atomics at all.
//    Kernel 1 (token_rank_kernel) gives position i its slot in the order of (token, position):
//      slot(i) = #{j : tok_j < tok_i} + #{j < i : tok_j == tok_i},
//    counted over all j (tokens staged through shared memory a tile at a time; integer counts, so any
//    split of the work gives the same answer). order[slot(i)] = i puts each token's positions together,
//    ascending. The first position of each token (the head) also records where its group starts and how
//    many positions it holds. This costs N^2 integer comparisons: about 270 million at B*T = 16384, a few
//    tens of microseconds on an H100-class GPU, against a micro-step of tens of milliseconds; it grows
//    quadratically with B*T (the host could build the same groups from its copy of the tokens instead).
//    Kernel 2 (wte_backward_kernel) runs one block per position; the blocks of heads sum their group's
//    dout rows in position order (fp32, 8 channels per thread) and add the sum into their token's row of
//    dwte, which no other block touches. Positions that are not heads return at once.
// Scratch: order, head_start, head_count, N ints each (encoder_backward_scratch_bytes, kernels/sizes.h).
//
// What only a GPU can check: the time of the rank kernel at the real B*T, and the load balance of kernel 2
// (one block sums all rows of a frequent token: a few hundred rows in GPT-2 text at B*T = 16384).
//
// The tensor-parallel pieces of the same op share these kernels: embedding_slice_forward is the lookup with
// zero rows for tokens outside wte rows [lo, lo + rows) (a 16-byte copy per 8 channels); embedding_slice_backward
// is the dwte pass above restricted to the slice (heads of tokens outside it return at once); position_forward
// adds wpe rows to a range of grid rows (add_table_rows, residual.cu); position_backward is the dwpe pass over the
// rows [first, first + n) of the grid. encoder_backward runs the dwte pass over the whole vocabulary and the dwpe
// pass over all rows, so the slice ops over those give its gradients bit for bit.
#include <algorithm>
#include <climits>

#include "kernels/cuda/ops.cuh"

namespace gpt::cuda {
namespace {

constexpr int kRankThreads = 128;  // positions per block in the rank kernel, and the tile of tokens

template <bool kVecPath>
__global__ void encoder_forward_kernel(bf16* out, const int* tokens, const bf16* wte, const bf16* wpe, int T, int C,
                                       size_t total /* N*C, or N*C/8 vectors */) {
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    if constexpr (kVecPath) {
      const size_t C8 = C / kVec, bt = i / C8, c = (i % C8) * kVec;
      const int t = static_cast<int>(bt % T);
      const size_t tok = static_cast<size_t>(tokens[bt]);
      float e[kVec], p[kVec];
      load8(e, wte + tok * C + c);
      load8(p, wpe + static_cast<size_t>(t) * C + c);
#pragma unroll
      for (int k = 0; k < kVec; k++) e[k] += p[k];
      store8(out + bt * C + c, e);
    } else {
      const size_t bt = i / C;  // row in (B*T)
      const int c = static_cast<int>(i % C);
      const int t = static_cast<int>(bt % T);
      const size_t tok = static_cast<size_t>(tokens[bt]);
      out[i] = to_bf16(to_f32(wte[tok * C + c]) + to_f32(wpe[static_cast<size_t>(t) * C + c]));
    }
  }
}

// out[i] = wte_rows[tokens[i] - lo] when lo <= tokens[i] < lo + rows, else 0: bf16 copied as it is.
template <bool kVecPath>
__global__ void embedding_slice_forward_kernel(bf16* out, const int* tokens, const bf16* wte_rows, int lo, int rows,
                                               int C, size_t total /* N*C, or N*C/8 vectors */) {
  const size_t per_row = kVecPath ? static_cast<size_t>(C / kVec) : static_cast<size_t>(C);
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    const size_t row = i / per_row, c = (i % per_row) * (kVecPath ? kVec : 1);
    const int tok = tokens[row];
    const bool in_slice = tok >= lo && tok - lo < rows;
    const size_t at = static_cast<size_t>(in_slice ? tok - lo : 0) * C + c;  // read only when in_slice
    if constexpr (kVecPath) {
      uint4 v = make_uint4(0u, 0u, 0u, 0u);  // bf16 zero is all-zero bits
      if (in_slice) v = *reinterpret_cast<const uint4*>(wte_rows + at);
      *reinterpret_cast<uint4*>(out + row * C + c) = v;
    } else {
      out[i] = in_slice ? wte_rows[at] : to_bf16(0.0f);
    }
  }
}

// Slot of every position in the (token, position) order; see the file comment.
__global__ void __launch_bounds__(kRankThreads)
    token_rank_kernel(int* order, int* head_start, int* head_count, const int* tokens, int N) {
  __shared__ int tile[kRankThreads];
  const int first = blockIdx.x * kRankThreads;  // this block's positions: [first, first + kRankThreads)
  const int tx = static_cast<int>(threadIdx.x);
  const int i = first + tx;
  const int ti = i < N ? tokens[i] : INT_MIN;
  int lt = 0, before = 0, after = 0;  // tokens below ti; ti's positions before i; after i
  for (int t0 = 0; t0 < N; t0 += kRankThreads) {
    __syncthreads();  // the previous tile is no longer read
    if (t0 + tx < N) tile[tx] = tokens[t0 + tx];
    __syncthreads();
    const int n = min(kRankThreads, N - t0);
    if (t0 < first) {  // every j of the tile is below every i of the block
      for (int k = 0; k < n; k++) {
        const int tj = tile[k];
        lt += tj < ti;
        before += tj == ti;
      }
    } else if (t0 > first) {  // every j above
      for (int k = 0; k < n; k++) {
        const int tj = tile[k];
        lt += tj < ti;
        after += tj == ti;
      }
    } else {  // the block's own tile
      for (int k = 0; k < n; k++) {
        const int tj = tile[k], j = t0 + k;
        lt += tj < ti;
        before += (tj == ti) & (j < i);
        after += (tj == ti) & (j > i);
      }
    }
  }
  if (i >= N) return;
  const int slot = lt + before;
  order[slot] = i;
  head_start[i] = slot;  // read only for heads, where slot = lt: the group's first slot
  head_count[i] = before == 0 ? before + after + 1 : 0;
}

// One block per position; heads add their group's dout rows (in position order) into row token - lo of dwte,
// for the tokens in [lo, lo + nrows) (the others return at once).
template <bool kVecPath>
__global__ void wte_backward_kernel(float* dwte, const bf16* dout, const int* tokens, const int* order,
                                    const int* head_start, const int* head_count, int lo, int nrows, int C) {
  const int i = blockIdx.x;
  const int count = head_count[i];
  if (count == 0) return;  // not the first position of its token
  const int tok = tokens[i];
  if (tok < lo || tok - lo >= nrows) return;  // outside the slice
  const int* rows = order + head_start[i];  // (count) positions, ascending
  float* drow = dwte + static_cast<size_t>(tok - lo) * C;
  if constexpr (kVecPath) {
    for (int q = threadIdx.x; q < C / kVec; q += blockDim.x) {
      float acc[kVec] = {};
#pragma unroll 4
      for (int k = 0; k < count; k++) {
        float d[kVec];
        load8(d, dout + static_cast<size_t>(rows[k]) * C + q * kVec);
#pragma unroll
        for (int e = 0; e < kVec; e++) acc[e] += d[e];
      }
      add8_f32(drow + q * kVec, acc);
    }
  } else {
    for (int c = threadIdx.x; c < C; c += blockDim.x) {
      float acc = 0.0f;
#pragma unroll 4
      for (int k = 0; k < count; k++) acc += to_f32(dout[static_cast<size_t>(rows[k]) * C + c]);
      drow[c] += acc;
    }
  }
}

// dwpe[t, c] += the sum of dout[i, c] over the rows i < n with (first + i) % T == t, in row order (rows
// i0, i0 + T, ... with i0 = (t - first) mod T; for the whole grid, first = 0 and n = B*T, that is b = 0..B-1);
// 8 channels per thread on the vector path. Positions no row lands on (n < T) are left untouched.
template <bool kVecPath>
__global__ void wpe_backward_kernel(float* dwpe, const bf16* dout, int first, int n, int T, int C) {
  const size_t TC = static_cast<size_t>(T) * C;
  const size_t total = kVecPath ? TC / kVec : TC;
  const size_t rows = static_cast<size_t>(n), period = static_cast<size_t>(T);
  const size_t shift = period - static_cast<size_t>(first) % period;  // i0 = (t + shift) % T
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    const size_t tc = kVecPath ? i * kVec : i;  // t * C + c
    const size_t i0 = (tc / C + shift) % period;
    if (i0 >= rows) continue;
    if constexpr (kVecPath) {
      float acc[kVec] = {};
      for (size_t r = i0; r < rows; r += period) {
        float d[kVec];
        load8(d, dout + r * C + tc % C);
#pragma unroll
        for (int e = 0; e < kVec; e++) acc[e] += d[e];
      }
      add8_f32(dwpe + tc, acc);
    } else {
      float sum = 0.0f;
      for (size_t r = i0; r < rows; r += period) sum += to_f32(dout[r * C + tc % C]);
      dwpe[tc] += sum;
    }
  }
}

}  // namespace

void encoder_forward(bf16* out, const int* tokens, const bf16* wte, const bf16* wpe, int B, int T, int C,
                     cudaStream_t stream) {
  const size_t total = static_cast<size_t>(B) * T * C;
  if (total == 0) return;
  const int threads = 256;
  if (C % kVec == 0 && aligned16(out) && aligned16(wte) && aligned16(wpe))
    GPT_LAUNCH(encoder_forward_kernel<true>, grid_for(total / kVec, threads), threads, 0, stream, out, tokens, wte, wpe,
               T, C, total / kVec);
  else
    GPT_LAUNCH(encoder_forward_kernel<false>, grid_for(total, threads), threads, 0, stream, out, tokens, wte, wpe, T, C,
               total);
}

void embedding_slice_forward(bf16* out, const int* tokens, const bf16* wte_rows, int lo, int rows, int N, int C,
                             cudaStream_t stream) {
  GPT_CHECK(lo >= 0 && rows >= 0, "cuda embedding slice: expected lo >= 0 and rows >= 0, got lo=", lo, " rows=", rows);
  const size_t total = static_cast<size_t>(N) * C;
  if (total == 0) return;
  const int threads = 256;
  if (C % kVec == 0 && aligned16(out) && aligned16(wte_rows))
    GPT_LAUNCH(embedding_slice_forward_kernel<true>, grid_for(total / kVec, threads), threads, 0, stream, out, tokens,
               wte_rows, lo, rows, C, total / kVec);
  else
    GPT_LAUNCH(embedding_slice_forward_kernel<false>, grid_for(total, threads), threads, 0, stream, out, tokens,
               wte_rows, lo, rows, C, total);
}

// The dwte pass (see the file comment) over the tokens in [lo, lo + rows).
void embedding_slice_backward(float* dwte_rows, const bf16* dout, const int* tokens, int lo, int rows, int N, int C,
                              void* scratch, cudaStream_t stream) {
  GPT_CHECK(lo >= 0 && rows >= 0, "cuda embedding slice: expected lo >= 0 and rows >= 0, got lo=", lo, " rows=", rows);
  if (N == 0 || C == 0 || rows == 0) return;
  const size_t ints = static_cast<size_t>(round_up_256(static_cast<int64_t>(N) * 4)) / 4;
  int* order = static_cast<int*>(scratch);  // (N)
  int* head_start = order + ints;           // (N)
  int* head_count = head_start + ints;      // (N)
  GPT_LAUNCH(token_rank_kernel, static_cast<unsigned>(ceil_div(N, kRankThreads)), kRankThreads, 0, stream, order,
             head_start, head_count, tokens, N);
  if (C % kVec == 0 && aligned16(dout) && aligned16(dwte_rows)) {
    const int threads = static_cast<int>(std::min<size_t>(256, ceil_div(C / kVec, kWarp) * kWarp));
    GPT_LAUNCH(wte_backward_kernel<true>, N, threads, 0, stream, dwte_rows, dout, tokens, order, head_start, head_count,
               lo, rows, C);
  } else {
    GPT_LAUNCH(wte_backward_kernel<false>, N, 256, 0, stream, dwte_rows, dout, tokens, order, head_start, head_count,
               lo, rows, C);
  }
}

void position_forward(bf16* x, const bf16* wpe, int first, int n, int T, int C, cudaStream_t stream) {
  GPT_CHECK(first >= 0 && n >= 0 && T > 0, "cuda position embedding: expected first >= 0, n >= 0 and T > 0, got first=",
            first, " n=", n, " T=", T);
  add_table_rows(x, wpe, first, n, T, C, stream);
}

// The dwpe pass over the grid rows [first, first + n).
void position_backward(float* dwpe, const bf16* dout, int first, int n, int T, int C, cudaStream_t stream) {
  GPT_CHECK(first >= 0 && n >= 0 && T > 0, "cuda position embedding: expected first >= 0, n >= 0 and T > 0, got first=",
            first, " n=", n, " T=", T);
  if (n == 0 || C == 0) return;
  const size_t tc = static_cast<size_t>(T) * C;
  const int threads = 256;
  if (C % kVec == 0 && aligned16(dout) && aligned16(dwpe))
    GPT_LAUNCH(wpe_backward_kernel<true>, grid_for(tc / kVec, threads), threads, 0, stream, dwpe, dout, first, n, T, C);
  else
    GPT_LAUNCH(wpe_backward_kernel<false>, grid_for(tc, threads), threads, 0, stream, dwpe, dout, first, n, T, C);
}

// The dwte pass over the whole vocabulary (every token id >= 0), then the dwpe pass over all B*T rows.
void encoder_backward(float* dwte, float* dwpe, const bf16* dout, const int* tokens, int B, int T, int C,
                      void* scratch, cudaStream_t stream) {
  const int N = B * T;
  if (N == 0 || C == 0) return;
  embedding_slice_backward(dwte, dout, tokens, 0, INT_MAX, N, C, scratch, stream);
  position_backward(dwpe, dout, 0, N, T, C, stream);
}

}  // namespace gpt::cuda
