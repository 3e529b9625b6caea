// Softmax + cross-entropy over the first V of Vp logits on the GPU (twin of kernels/cpu/classifier.cpp).
//
// One block of 1024 threads per row, three passes over the row, all from registers when the row fits:
//   A  each thread loads its 16-byte vectors of the row (8 logits each: columns 8(k*1024 + tid) ..,
//      k < kCached) into registers and takes their max over the columns below V; block max M.
//   B  S = sum over j < V of exp(x_j - M) (as exp2f((x_j - M) * log2 e)); block sum in a fixed order.
//      loss = log(S) + M - x[target].
//   C  (backward only) dlogits_j = dloss * (exp(x_j - M) / S - [j == target]) written over the logits as
//      16-byte vectors; 0 in the padded columns [V, Vp).
// With kCached = 7 a row of up to 7 * 1024 * 8 = 57344 columns (GPT-2's Vp = 50304) is read from memory once
// and, in backward, written once: the training pass moves 2 * N * Vp * 2 bytes. Columns beyond the cached
// ones are re-read from memory in each pass. The block reductions (warp shuffles, then the 32 warp values in
// order) are deterministic. x[target] is read by thread 0 before the first barrier, so before any write.
// Rows that are not 16-byte aligned (Vp % 8 != 0, or an unaligned buffer) take the same passes one element
// at a time without the register cache.
//
// The loss total: classifier_backward's second, small kernel (one block) adds the N losses in double in a
// fixed order (thread i takes rows i, i + 1024, ...; then the warps' sums in order) to *loss_sum, so a
// trainer keeps its step's loss on the device and reads it once per step.
//
// The vocab-parallel loss (classifier_slice_*, tensor parallelism) runs the same passes over one rank's Vs
// columns, one pass per launch with the TP group's reductions between them: the statistics (pass A over the
// valid columns, and the target's logit), the exp-sum at the group's max (pass B), then the losses and pass C
// from the group's statistics. Each is one block of 1024 threads per row, reading the row once (through the same
// register cache, loaded up front), with the same exponentials and block reductions as above.
//
// What only a GPU can check: the register count (-Xptxas -v must show no spills at 1024 threads: the
// launch bound caps a thread at 64 registers, 28 of them the cache) and the bandwidth the pass reaches.
#include "kernels/cuda/ops.cuh"

namespace gpt::cuda {
namespace {

constexpr int kThreads = 1024;
constexpr int kWarps = kThreads / kWarp;
constexpr int kCached = 7;  // 16-byte vectors per thread kept in registers
constexpr float kLog2e = 1.4426950408889634f;
constexpr int kSumThreads = 1024;

__device__ __forceinline__ float exp_shifted(float x, float M) { return exp2f((x - M) * kLog2e); }

// The vector of 8 bf16 as raw bits, and its element k as fp32.
__device__ __forceinline__ float elem(const uint4& u, int k) {
  const __nv_bfloat162 h = reinterpret_cast<const __nv_bfloat162*>(&u)[k / 2];
  return k % 2 == 0 ? __low2float(h) : __high2float(h);
}

// The vector path's three passes over one row (bf16, Vp % 8 == 0, 16-byte aligned): the first kCached
// vectors of each thread stay in registers (cache), the rest are read again in each pass.
__device__ __forceinline__ float row_max_vec(const bf16* x, uint4 (&cache)[kCached], int V, int nvec) {
  float m = -INFINITY;
#pragma unroll
  for (int k = 0; k < kCached; k++) {
    const int v = k * kThreads + threadIdx.x;
    if (v < nvec) {
      cache[k] = reinterpret_cast<const uint4*>(x)[v];
#pragma unroll
      for (int e = 0; e < kVec; e++)
        if (v * kVec + e < V) m = fmaxf(m, elem(cache[k], e));
    }
  }
  for (int v = kCached * kThreads + threadIdx.x; v < nvec; v += kThreads) {  // beyond the cache (Vp > 57344)
    const uint4 u = reinterpret_cast<const uint4*>(x)[v];
#pragma unroll
    for (int e = 0; e < kVec; e++)
      if (v * kVec + e < V) m = fmaxf(m, elem(u, e));
  }
  return m;
}

// The cache alone (for the slice passes, which read the row once each).
__device__ __forceinline__ void load_cache(const bf16* x, uint4 (&cache)[kCached], int nvec) {
#pragma unroll
  for (int k = 0; k < kCached; k++) {
    const int v = k * kThreads + threadIdx.x;
    if (v < nvec) cache[k] = reinterpret_cast<const uint4*>(x)[v];
  }
}

__device__ __forceinline__ float row_expsum_vec(const bf16* x, const uint4 (&cache)[kCached], float M, int V, int nvec) {
  float s = 0.0f;
#pragma unroll
  for (int k = 0; k < kCached; k++) {
    const int v = k * kThreads + threadIdx.x;
    if (v < nvec) {
#pragma unroll
      for (int e = 0; e < kVec; e++)
        if (v * kVec + e < V) s += exp_shifted(elem(cache[k], e), M);
    }
  }
  for (int v = kCached * kThreads + threadIdx.x; v < nvec; v += kThreads) {
    const uint4 u = reinterpret_cast<const uint4*>(x)[v];
#pragma unroll
    for (int e = 0; e < kVec; e++)
      if (v * kVec + e < V) s += exp_shifted(elem(u, e), M);
  }
  return s;
}

// dlogits = (softmax - onehot(target)) * dloss written over the row, pads (j >= V) zero.
__device__ __forceinline__ void row_grad_vec(bf16* x, const uint4 (&cache)[kCached], float M, float inv, int target,
                                             float dloss, int V, int nvec) {
  auto grad_vector = [&](const uint4& u, int v) {
    float g[kVec];
#pragma unroll
    for (int e = 0; e < kVec; e++) {
      const int j = v * kVec + e;
      g[e] = j < V ? (exp_shifted(elem(u, e), M) * inv - (j == target ? 1.0f : 0.0f)) * dloss : 0.0f;
    }
    store8(x + static_cast<size_t>(v) * kVec, g);
  };
#pragma unroll
  for (int k = 0; k < kCached; k++) {
    const int v = k * kThreads + threadIdx.x;
    if (v < nvec) grad_vector(cache[k], v);
  }
  for (int v = kCached * kThreads + threadIdx.x; v < nvec; v += kThreads)
    grad_vector(reinterpret_cast<const uint4*>(x)[v], v);
}

// The one-element path's passes (any row length, any alignment): thread tid takes columns tid, tid + kThreads, ...
__device__ __forceinline__ float row_max_scalar(const bf16* x, int V) {
  float m = -INFINITY;
  for (int j = threadIdx.x; j < V; j += kThreads) m = fmaxf(m, to_f32(x[j]));
  return m;
}
__device__ __forceinline__ float row_expsum_scalar(const bf16* x, float M, int V) {
  float s = 0.0f;
  for (int j = threadIdx.x; j < V; j += kThreads) s += exp_shifted(to_f32(x[j]), M);
  return s;
}
__device__ __forceinline__ void row_grad_scalar(bf16* x, float M, float inv, int target, float dloss, int V, int Vp) {
  for (int j = threadIdx.x; j < Vp; j += kThreads) {
    const float g = j < V ? (exp_shifted(to_f32(x[j]), M) * inv - (j == target ? 1.0f : 0.0f)) * dloss : 0.0f;
    x[j] = to_bf16(g);
  }
}

__device__ __forceinline__ float row_loss(float S, float M, float target_logit) { return logf(S) + M - target_logit; }

template <bool kBackward, bool kVecPath>
__global__ void __launch_bounds__(kThreads)
    classifier_kernel(float* losses, bf16* logits, const int* targets, float dloss, int V, int Vp) {
  __shared__ float red[kWarps];
  __shared__ float s_target_logit;
  const int tid = threadIdx.x;
  const size_t row = blockIdx.x;
  bf16* x = logits + row * Vp;
  const int target = targets[row];
  const bool valid = target >= 0 && target < V;
  if (tid == 0) s_target_logit = valid ? to_f32(x[target]) : NAN;  // before any write (barriers below)

  if constexpr (kVecPath) {
    const int nvec = Vp / kVec;
    uint4 cache[kCached];
    const float M = block_max(row_max_vec(x, cache, V, nvec), red);
    const float S = block_sum(row_expsum_vec(x, cache, M, V, nvec), red);
    if (tid == 0) losses[row] = row_loss(S, M, s_target_logit);  // a bad target gives a NaN loss
    if constexpr (kBackward) row_grad_vec(x, cache, M, 1.0f / S, target, dloss, V, nvec);
  } else {
    const float M = block_max(row_max_scalar(x, V), red);
    const float S = block_sum(row_expsum_scalar(x, M, V), red);
    if (tid == 0) losses[row] = row_loss(S, M, s_target_logit);
    if constexpr (kBackward) row_grad_scalar(x, M, 1.0f / S, target, dloss, V, Vp);
  }
}

// ---- the vocab-parallel passes: one block per row of this rank's (N, Vs) logits, `valid` real columns ----
// The column of target t among the slice's valid columns [lo, lo + valid), or -1.
__device__ __forceinline__ int slice_column(int t, int lo, int valid) {
  return t >= lo && t - lo < valid ? t - lo : -1;
}

// maxes = the max of the valid columns (-inf for none); target = the target's logit when it is one of them, else
// 0, NaN when it lies outside the vocabulary [0, V).
template <bool kVecPath>
__global__ void __launch_bounds__(kThreads) slice_stats_kernel(float* maxes, float* target, const bf16* logits,
                                                               const int* targets, int lo, int valid, int Vs, int V) {
  __shared__ float red[kWarps];
  const size_t row = blockIdx.x;
  const bf16* x = logits + row * Vs;
  float m;
  if constexpr (kVecPath) {
    uint4 cache[kCached];
    m = row_max_vec(x, cache, valid, (valid + kVec - 1) / kVec);  // the vectors holding valid columns
  } else {
    m = row_max_scalar(x, valid);
  }
  const float M = block_max(m, red);
  if (threadIdx.x == 0) {
    const int t = targets[row], j = slice_column(t, lo, valid);
    maxes[row] = M;
    target[row] = t < 0 || t >= V ? NAN : j >= 0 ? to_f32(x[j]) : 0.0f;
  }
}

// sums = the sum of exp(x - maxes[row]) over the valid columns.
template <bool kVecPath>
__global__ void __launch_bounds__(kThreads)
    slice_sumexp_kernel(float* sums, const bf16* logits, const float* maxes, int valid, int Vs) {
  __shared__ float red[kWarps];
  const size_t row = blockIdx.x;
  const bf16* x = logits + row * Vs;
  const float M = maxes[row];
  float s;
  if constexpr (kVecPath) {
    const int nvec = (valid + kVec - 1) / kVec;
    uint4 cache[kCached];
    load_cache(x, cache, nvec);
    s = row_expsum_vec(x, cache, M, valid, nvec);
  } else {
    s = row_expsum_scalar(x, M, valid);
  }
  const float S = block_sum(s, red);
  if (threadIdx.x == 0) sums[row] = S;
}

// The losses, and dlogits = dloss * (exp(x - M) / S - onehot) over the row, 0 in the padding columns.
template <bool kVecPath>
__global__ void __launch_bounds__(kThreads)
    slice_backward_kernel(float* losses, bf16* logits, const float* maxes, const float* sums, const float* target,
                          const int* targets, int lo, int valid, float dloss, int Vs) {
  const size_t row = blockIdx.x;
  bf16* x = logits + row * Vs;
  const float M = maxes[row], S = sums[row];
  if (threadIdx.x == 0) losses[row] = row_loss(S, M, target[row]);
  const int hot = slice_column(targets[row], lo, valid);
  if constexpr (kVecPath) {
    const int nvec = Vs / kVec;
    uint4 cache[kCached];
    load_cache(x, cache, nvec);
    row_grad_vec(x, cache, M, 1.0f / S, hot, dloss, valid, nvec);
  } else {
    row_grad_scalar(x, M, 1.0f / S, hot, dloss, valid, Vs);
  }
}

// The losses alone (no dlogits wanted): one thread per row.
__global__ void slice_losses_kernel(float* losses, const float* maxes, const float* sums, const float* target, int N) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < N) losses[i] = row_loss(sums[i], maxes[i], target[i]);
}

// *loss_sum += sum of losses[0..N), in double: thread i adds rows i, i + kSumThreads, ... in order, then
// the warps' sums are added in order by thread 0. One block: the order never depends on the GPU.
__global__ void __launch_bounds__(kSumThreads) loss_sum_kernel(double* loss_sum, const float* losses, int N) {
  __shared__ double s[kSumThreads / kWarp];
  double t = 0.0;
  for (int i = threadIdx.x; i < N; i += kSumThreads) t += static_cast<double>(losses[i]);
  t = warp_sum(t);
  if (threadIdx.x % kWarp == 0) s[threadIdx.x / kWarp] = t;
  __syncthreads();
  if (threadIdx.x == 0) {
    double total = 0.0;
    for (int w = 0; w < kSumThreads / kWarp; w++) total += s[w];
    *loss_sum += total;
  }
}

// Rows of `width` bf16 that the vector path can read: every row 16-byte aligned.
bool vector_rows(const bf16* logits, int width) { return width % kVec == 0 && aligned16(logits); }

template <bool kBackward>
void launch(float* losses, bf16* logits, const int* targets, float dloss, int N, int V, int Vp, cudaStream_t stream) {
  if (vector_rows(logits, Vp))
    GPT_LAUNCH(classifier_kernel<kBackward, true>, N, kThreads, 0, stream, losses, logits, targets, dloss, V, Vp);
  else
    GPT_LAUNCH(classifier_kernel<kBackward, false>, N, kThreads, 0, stream, losses, logits, targets, dloss, V, Vp);
}

void check_slice(int lo, int valid, int Vs) {
  GPT_CHECK(lo >= 0 && valid >= 0 && valid <= Vs,
            "cuda classifier slice: expected lo >= 0 and 0 <= valid <= Vs, got lo=", lo, " valid=", valid, " Vs=", Vs);
}

}  // namespace

void classifier_forward(float* losses, const bf16* logits, const int* targets, int N, int V, int Vp,
                        cudaStream_t stream) {
  GPT_CHECK(V > 0 && V <= Vp, "cuda classifier: expected 0 < V <= Vp, got V=", V, " Vp=", Vp);
  if (N == 0) return;
  // The forward instance never writes the logits.
  launch<false>(losses, const_cast<bf16*>(logits), targets, 0.0f, N, V, Vp, stream);
}

void classifier_backward(bf16* logits_to_dlogits, float* losses, double* loss_sum, const int* targets, float dloss,
                         int N, int V, int Vp, cudaStream_t stream) {
  GPT_CHECK(V > 0 && V <= Vp, "cuda classifier: expected 0 < V <= Vp, got V=", V, " Vp=", Vp);
  if (N == 0) return;
  launch<true>(losses, logits_to_dlogits, targets, dloss, N, V, Vp, stream);
  if (loss_sum) {
    GPT_LAUNCH(loss_sum_kernel, 1, kSumThreads, 0, stream, loss_sum, losses, N);
  }
}

void classifier_slice_stats(float* maxes, float* target, const bf16* logits, const int* targets, int lo, int valid,
                            int N, int Vs, int V, cudaStream_t stream) {
  check_slice(lo, valid, Vs);
  if (N == 0) return;
  if (vector_rows(logits, Vs))
    GPT_LAUNCH(slice_stats_kernel<true>, N, kThreads, 0, stream, maxes, target, logits, targets, lo, valid, Vs, V);
  else
    GPT_LAUNCH(slice_stats_kernel<false>, N, kThreads, 0, stream, maxes, target, logits, targets, lo, valid, Vs, V);
}

void classifier_slice_sumexp(float* sums, const bf16* logits, const float* maxes, int valid, int N, int Vs,
                             cudaStream_t stream) {
  check_slice(0, valid, Vs);
  if (N == 0) return;
  if (vector_rows(logits, Vs))
    GPT_LAUNCH(slice_sumexp_kernel<true>, N, kThreads, 0, stream, sums, logits, maxes, valid, Vs);
  else
    GPT_LAUNCH(slice_sumexp_kernel<false>, N, kThreads, 0, stream, sums, logits, maxes, valid, Vs);
}

void classifier_slice_backward(bf16* logits_to_dlogits, float* losses, double* loss_sum, const float* maxes,
                               const float* sums, const float* target, const int* targets, int lo, int valid,
                               float dloss, int N, int Vs, cudaStream_t stream) {
  check_slice(lo, valid, Vs);
  if (N == 0) return;
  bf16* x = logits_to_dlogits;
  if (!x)
    GPT_LAUNCH(slice_losses_kernel, static_cast<unsigned>(ceil_div(N, 256)), 256, 0, stream, losses, maxes, sums,
               target, N);
  else if (vector_rows(x, Vs))
    GPT_LAUNCH(slice_backward_kernel<true>, N, kThreads, 0, stream, losses, x, maxes, sums, target, targets, lo, valid,
               dloss, Vs);
  else
    GPT_LAUNCH(slice_backward_kernel<false>, N, kThreads, 0, stream, losses, x, maxes, sums, target, targets, lo, valid,
               dloss, Vs);
  if (loss_sum) GPT_LAUNCH(loss_sum_kernel, 1, kSumThreads, 0, stream, loss_sum, losses, N);
}

}  // namespace gpt::cuda
