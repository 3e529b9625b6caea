// Softmax cross-entropy over the first V of Vp logits per row (columns V..Vp-1 are vocabulary padding and
// never enter the softmax). Forward: loss = log(sum_j exp(l_j - max)) + max - l_target.
// Backward is fused with forward and works in place: exp(l_j - max) is written over the logits while summing,
// then scaled to dloss * (p_j - [j == target]); the padding columns become exactly 0. No separate softmax
// buffer is ever stored, so the (N, Vp) logits buffer is the only big allocation. In training the backward is
// the only classifier pass: it also adds the micro-batch's summed loss to a running (double) total, which the
// trainer reads once per step.
//
// The vocab-parallel version (classifier_slice_*, tensor parallelism) runs the same steps on one slice of the
// columns, with the TP group's reductions between them: the row max (row_max) and the target's logit, the
// exp-sum at the group's max (exp_sum, the forward's loop), then the losses and the dlogits from the group's
// statistics (finish_dlogits, the backward's last steps). Each exponential is the same fast_exp of the same
// difference as in the unsliced op, so the group's losses and dlogits differ from classifier_backward's only by
// the order in which the exp-sum is added up.
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

// sum over j < n of exp(l[j] - mx)
inline float exp_sum(const float* l /*(n)*/, int n, float mx) {
  float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
  for (int j = 0; j < n; j++) sum += fast_exp(l[j] - mx);
  return sum;
}

inline float row_loss(float sum, float mx, float target_logit) { return std::log(sum) + mx - target_logit; }

// The row's exponentials e (the first n of `width` columns) -> dlogits: e * k with k = dloss / sum, dloss less
// at the target's column `hot` (when 0 <= hot < n), 0 in the padding columns [n, width).
inline void finish_dlogits(float* l /*(width)*/, int n, int width, float k, int hot, float dloss) {
#pragma omp simd
  for (int j = 0; j < n; j++) l[j] *= k;
  if (hot >= 0 && hot < n) l[hot] -= dloss;
  std::fill(l + n, l + width, 0.0f);
}

// *loss_sum += the N losses, added in double in row order: the same sum for any thread count.
void add_loss_sum(double* loss_sum, const float* losses /*(N)*/, int N) {
  if (!loss_sum) return;
  double s = 0.0;
  for (int i = 0; i < N; i++) s += losses[i];
  *loss_sum += s;
}

// The column of `tok` among a slice's valid columns [lo, lo + valid), or -1.
inline int slice_column(int tok, int lo, int valid) { return tok >= lo && tok - lo < valid ? tok - lo : -1; }

void check_slice(int lo, int valid, int Vs) {
  GPT_CHECK(lo >= 0 && valid >= 0 && valid <= Vs, "classifier slice: expected lo >= 0 and 0 <= valid <= Vs, got lo=",
            lo, " valid=", valid, " Vs=", Vs);
}

}  // namespace

void classifier_forward(float* losses, const float* logits, const int* targets, int N, int V, int Vp) {
  check_targets(targets, N, V);
#pragma omp parallel for schedule(static)
  for (int i = 0; i < N; i++) {
    const float* l = logits + static_cast<size_t>(i) * Vp;  // (Vp)
    float mx = row_max(l, V);
    losses[i] = row_loss(exp_sum(l, V, mx), mx, l[targets[i]]);
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
    losses[i] = row_loss(sum, mx, target_logit);
    finish_dlogits(l, V, Vp, dloss / sum, targets[i], dloss);
  }
  add_loss_sum(loss_sum, losses, N);
}

void classifier_slice_stats(float* maxes, float* target, const float* logits, const int* targets, int lo, int valid,
                            int N, int Vs, int V) {
  check_slice(lo, valid, Vs);
  check_targets(targets, N, V);
#pragma omp parallel for schedule(static)
  for (int i = 0; i < N; i++) {
    const float* l = logits + static_cast<size_t>(i) * Vs;  // (Vs)
    maxes[i] = row_max(l, valid);
    const int hot = slice_column(targets[i], lo, valid);
    target[i] = hot >= 0 ? l[hot] : 0.0f;
  }
}

void classifier_slice_sumexp(float* sums, const float* logits, const float* maxes, int valid, int N, int Vs) {
  check_slice(0, valid, Vs);
#pragma omp parallel for schedule(static)
  for (int i = 0; i < N; i++) sums[i] = exp_sum(logits + static_cast<size_t>(i) * Vs, valid, maxes[i]);
}

void classifier_slice_backward(float* logits_to_dlogits, float* losses, double* loss_sum, const float* maxes,
                               const float* sums, const float* target, const int* targets, int lo, int valid,
                               float dloss, int N, int Vs) {
  check_slice(lo, valid, Vs);
#pragma omp parallel for schedule(static)
  for (int i = 0; i < N; i++) {
    losses[i] = row_loss(sums[i], maxes[i], target[i]);
    if (!logits_to_dlogits) continue;
    float* l = logits_to_dlogits + static_cast<size_t>(i) * Vs;  // (Vs): logits in, dlogits out
    const float mx = maxes[i];
#pragma omp simd
    for (int j = 0; j < valid; j++) l[j] = fast_exp(l[j] - mx);
    finish_dlogits(l, valid, Vs, dloss / sums[i], slice_column(targets[i], lo, valid), dloss);
  }
  add_loss_sum(loss_sum, losses, N);
}

}  // namespace gpt::cpu
