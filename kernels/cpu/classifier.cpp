// Softmax cross-entropy over the first V of Vp logits per row (columns V..Vp-1 are vocabulary padding and
// never enter the softmax). Forward: loss = log(sum_j exp(l_j - max)) + max - l_target.
// Backward is fused with forward and works in place: exp(l_j - max) is written over the logits while summing,
// then scaled to dloss * (p_j - [j == target]); the padding columns become exactly 0. No separate softmax
// buffer is ever stored, so the (N, Vp) logits buffer is the only big allocation. In training the backward is
// the only classifier pass: it also adds the micro-batch's summed loss to a running (double) total, which the
// trainer reads once per step.
#include <algorithm>
#include <cmath>

#include "src/core/check.h"
#include "kernels/cpu/ops.h"

namespace gpt::cpu {

namespace {

void check_targets(const int* targets, int N, int V) {
  for (int i = 0; i < N; i++)
    GPT_CHECK(targets[i] >= 0 && targets[i] < V, "classifier: target id ", targets[i], " at row ", i,
              " is outside the vocabulary [0, ", V, ") (bad data shard or wrong vocab size)");
}

}  // namespace

void classifier_forward(float* losses, const float* logits, const int* targets, int N, int V, int Vp) {
  check_targets(targets, N, V);
#pragma omp parallel for schedule(static)
  for (int i = 0; i < N; i++) {
    const float* l = logits + static_cast<size_t>(i) * Vp;  // (Vp)
    float mx = row_max(l, V);
    float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
    for (int j = 0; j < V; j++) sum += fast_exp(l[j] - mx);
    losses[i] = std::log(sum) + mx - l[targets[i]];
  }
}

void classifier_backward(float* logits_to_dlogits, float* losses, double* loss_sum, const int* targets, float dloss,
                         int N, int V, int Vp) {
  check_targets(targets, N, V);
#pragma omp parallel for schedule(static)
  for (int i = 0; i < N; i++) {
    float* l = logits_to_dlogits + static_cast<size_t>(i) * Vp;  // (Vp): logits in, dlogits out
    float mx = row_max(l, V);
    float target_logit = l[targets[i]];
    float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
    for (int j = 0; j < V; j++) {
      float e = fast_exp(l[j] - mx);
      l[j] = e;
      sum += e;
    }
    losses[i] = std::log(sum) + mx - target_logit;
    float k = dloss / sum;
#pragma omp simd
    for (int j = 0; j < V; j++) l[j] *= k;
    l[targets[i]] -= dloss;
    std::fill(l + V, l + Vp, 0.0f);
  }
  if (loss_sum) {
    double s = 0.0;
    for (int i = 0; i < N; i++) s += losses[i];  // row order: the same sum for any thread count
    *loss_sum += s;
  }
}

}  // namespace gpt::cpu
