// Softmax + cross-entropy over the first V of Vp logits on the GPU (twin of kernels/cpu/classifier.cpp).
// One block per row. A single pass keeps an online (max, sum of exp(x - max)) per thread, merged across the
// block, so the softmax is never materialised:
//   loss = log(sum) + max - x[target]
// Backward (fused) writes dlogits = dloss * (softmax - onehot(target)) over the logits in place, zero in the
// padded columns [V, Vp). x[target] is read before any thread overwrites its row.
#include "kernels/cuda/ops.cuh"

namespace gpt::cuda {
namespace {

constexpr int kThreads = 512;

// Merges the partial (max, sum) of another range into (m, s); an empty range is (-inf, 0).
__device__ __forceinline__ void merge_max_sum(float& m, float& s, float m2, float s2) {
  const float M = fmaxf(m, m2);
  if (M == -INFINITY) return;  // both empty
  s = s * expf(m - M) + s2 * expf(m2 - M);
  m = M;
}

template <bool kBackward>
__global__ void __launch_bounds__(kThreads)
    classifier_kernel(float* losses, bf16* logits, const int* targets, float dloss, int V, int Vp) {
  __shared__ float sm[kThreads / kWarp], ss[kThreads / kWarp];
  __shared__ float s_target_logit;
  const size_t row = blockIdx.x;
  bf16* x = logits + row * Vp;
  const int target = targets[row];
  const bool valid = target >= 0 && target < V;
  if (threadIdx.x == 0) s_target_logit = valid ? to_f32(x[target]) : NAN;

  float m = -INFINITY, s = 0.0f;
  for (int j = threadIdx.x; j < V; j += kThreads) {
    const float v = to_f32(x[j]);
    if (v > m) {
      s = s * expf(m - v) + 1.0f;  // first element: 0 * exp(-inf) + 1
      m = v;
    } else {
      s += expf(v - m);
    }
  }
  for (int o = kWarp / 2; o > 0; o /= 2) {
    const float m2 = __shfl_xor_sync(0xffffffffu, m, o);
    const float s2 = __shfl_xor_sync(0xffffffffu, s, o);
    merge_max_sum(m, s, m2, s2);
  }
  const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
  if (lane == 0) {
    sm[warp] = m;
    ss[warp] = s;
  }
  __syncthreads();  // also orders the read of x[target] before any write below
  float row_max = -INFINITY, row_sum = 0.0f;  // every thread merges the warps in the same order
  for (int w = 0; w < kThreads / kWarp; w++) merge_max_sum(row_max, row_sum, sm[w], ss[w]);
  // A bad target gives a NaN loss.
  if (threadIdx.x == 0) losses[row] = logf(row_sum) + row_max - s_target_logit;
  if (!kBackward) return;
  const float inv = 1.0f / row_sum;
  for (int j = threadIdx.x; j < Vp; j += kThreads) {
    float g = 0.0f;
    if (j < V) g = (expf(to_f32(x[j]) - row_max) * inv - (j == target ? 1.0f : 0.0f)) * dloss;
    x[j] = to_bf16(g);
  }
}

}  // namespace

void classifier_forward(float* losses, const bf16* logits, const int* targets, int N, int V, int Vp,
                        cudaStream_t stream) {
  GPT_CHECK(V > 0 && V <= Vp, "cuda classifier: expected 0 < V <= Vp, got V=", V, " Vp=", Vp);
  if (N == 0) return;
  // The forward instance never writes the logits.
  classifier_kernel<false><<<N, kThreads, 0, stream>>>(losses, const_cast<bf16*>(logits), targets, 0.0f, V, Vp);
  CUDA_CHECK_LAUNCH();
}

void classifier_backward(bf16* logits_to_dlogits, float* losses, const int* targets, float dloss, int N, int V,
                         int Vp, cudaStream_t stream) {
  GPT_CHECK(V > 0 && V <= Vp, "cuda classifier: expected 0 < V <= Vp, got V=", V, " Vp=", Vp);
  if (N == 0) return;
  classifier_kernel<true><<<N, kThreads, 0, stream>>>(losses, logits_to_dlogits, targets, dloss, V, Vp);
  CUDA_CHECK_LAUNCH();
}

}  // namespace gpt::cuda
