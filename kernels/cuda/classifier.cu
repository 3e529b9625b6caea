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
    if (tid == 0) losses[row] = logf(S) + M - s_target_logit;  // a bad target gives a NaN loss
    if constexpr (kBackward) row_grad_vec(x, cache, M, 1.0f / S, target, dloss, V, nvec);
  } else {
    float m = -INFINITY;
    for (int j = tid; j < V; j += kThreads) m = fmaxf(m, to_f32(x[j]));
    const float M = block_max(m, red);
    float s = 0.0f;
    for (int j = tid; j < V; j += kThreads) s += exp_shifted(to_f32(x[j]), M);
    const float S = block_sum(s, red);
    if (tid == 0) losses[row] = logf(S) + M - s_target_logit;
    if constexpr (kBackward) {
      const float inv = 1.0f / S;
      for (int j = tid; j < Vp; j += kThreads) {
        const float g = j < V ? (exp_shifted(to_f32(x[j]), M) * inv - (j == target ? 1.0f : 0.0f)) * dloss : 0.0f;
        x[j] = to_bf16(g);
      }
    }
  }
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

template <bool kBackward>
void launch(float* losses, bf16* logits, const int* targets, float dloss, int N, int V, int Vp, cudaStream_t stream) {
  if (Vp % kVec == 0 && aligned16(logits))
    GPT_LAUNCH(classifier_kernel<kBackward, true>, N, kThreads, 0, stream, losses, logits, targets, dloss, V, Vp);
  else
    GPT_LAUNCH(classifier_kernel<kBackward, false>, N, kThreads, 0, stream, losses, logits, targets, dloss, V, Vp);
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

}  // namespace gpt::cuda
