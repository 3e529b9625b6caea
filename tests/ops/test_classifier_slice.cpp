// Why: the tensor-parallel model computes the cross-entropy with each rank holding one slice of the vocabulary's
// logits (classifier_slice_stats, _sumexp, _backward, with the group's reductions between them). These check each
// cpu pass against a double loop over one slice (padding columns never in the max or the sum and 0 in dlogits,
// valid = 0, targets outside the slice), and the identity the model rests on: S slices run as a TP group would
// run them, their statistics combined on the host (maxes by max, target logits and sums by a float sum in rank
// order), give the losses and dlogits of classifier_backward over the whole (N, Vp) logits, within the bound
// derived below.
//
// Bounds (u = 2^-24, gamma_n = n u / (1 - n u), op_test_util.h):
//  - stats: a max and a copied logit: exact.
//  - sumexp, given M: each term is fast_exp of the float difference x - M: 4u of its own (the kernel's ~2 ulp)
//    and u |x - M| from the rounded difference, relative to the term; the float sum of n terms adds
//    gamma_(n-1) times their sum.
//  - backward, given M, S and the target logit t (exact inputs): the loss log(S) + M - t carries 4u |log S| (log)
//    and u for each of the two additions; a dlogit dloss * p - [hot] dloss, p = e / S, carries e's error, one
//    rounding for dloss / S and one for the product, and one more u |result| at the target column.
#include <algorithm>

#include "tests/ops/op_test_util.h"

namespace gpt::test {
namespace {

constexpr float kPad = 80.0f;  // padding columns hold this: any leak into a max or an exp-sum dominates it

// One row-major (N, width) block of logits with padding from column `valid` on.
std::vector<float> slice_logits(int N, int valid, int width, double scale, uint64_t seed) {
  auto l = randn(static_cast<size_t>(N) * width, seed, scale);
  for (int i = 0; i < N; i++)
    for (int j = valid; j < width; j++) l[static_cast<size_t>(i) * width + j] = kPad;
  return l;
}

// A slice [lo, lo + Vs) with `valid` real columns, and targets inside it, below it and above it.
struct SliceCase {
  int N = 6, Vs, valid, lo, V;
  std::vector<float> logits;  // (N, Vs)
  std::vector<int> targets;   // (N)
  SliceCase(int Vs_, int valid_, int lo_, int V_, uint64_t seed) : Vs(Vs_), valid(valid_), lo(lo_), V(V_) {
    logits = slice_logits(N, valid, Vs, 2.0, seed);
    targets = {lo, lo + valid - 1, lo - 1, lo + valid, 0, V - 1};  // the slice's edges, and just outside them
    for (auto& t : targets) t = std::clamp(t, 0, V - 1);                // always a token of the vocabulary
  }
  bool hot(int i, int j) const { return targets[i] == lo + j && j < valid; }
  float x(int i, int j) const { return logits[static_cast<size_t>(i) * Vs + j]; }
};

// valid < Vs with padding, valid = Vs, valid = 0 (a slice wholly in the padding)
const int kSlices[][4] = {{16, 11, 32, 43}, {16, 16, 16, 43}, {16, 0, 48, 43}};  // Vs, valid, lo, V

TEST(ClassifierSlice, StatsAreTheMaxOfTheValidColumnsAndTheTargetsLogit) {
  auto be = cpu_backend();
  uint64_t seed = 1;
  for (const auto& k : kSlices) {
    SliceCase c(k[0], k[1], k[2], k[3], seed++);
    std::vector<float> want_max(c.N, -INFINITY), want_target(c.N, 0.0f);  // a max and a copy: exact
    for (int i = 0; i < c.N; i++)
      for (int j = 0; j < c.valid; j++) {
        want_max[i] = std::max(want_max[i], c.x(i, j));
        if (c.hot(i, j)) want_target[i] = c.x(i, j);
      }
    std::vector<float> maxes(c.N, NAN), target(c.N, NAN);
    be->classifier_slice_stats(maxes.data(), target.data(), c.logits.data(), c.targets.data(), c.lo, c.valid, c.N,
                               c.Vs, c.V);
    EXPECT_EQ(maxes, want_max) << "valid=" << c.valid;  // -inf for a row with no valid column
    EXPECT_EQ(target, want_target) << "valid=" << c.valid;
  }
}

TEST(ClassifierSlice, SumexpAddsTheValidColumnsOnly) {
  auto be = cpu_backend();
  uint64_t seed = 10;
  for (const auto& k : kSlices) {
    SliceCase c(k[0], k[1], k[2], k[3], seed++);
    std::vector<float> maxes(c.N);
    std::vector<double> want(c.N, 0.0), bound(c.N, 0.0);
    for (int i = 0; i < c.N; i++) {
      maxes[i] = static_cast<float>(3.0 + 0.25 * i);  // a group max above the slice's own values
      double per_term = 0;
      for (int j = 0; j < c.valid; j++) {
        const double d = static_cast<double>(c.x(i, j)) - maxes[i], e = std::exp(d);
        want[i] += e;
        per_term += e * (4 * kUnitRoundoff + kUnitRoundoff * std::fabs(d));
      }
      bound[i] = per_term + gamma_n(std::max(c.valid - 1, 0)) * want[i];
    }
    std::vector<float> sums(c.N, NAN);
    be->classifier_slice_sumexp(sums.data(), c.logits.data(), maxes.data(), c.valid, c.N, c.Vs);
    EXPECT_TRUE(all_within(sums, want, bound)) << "valid=" << c.valid;
  }
}

TEST(ClassifierSlice, BackwardWritesLossesDlogitsAndTheLossTotal) {
  auto be = cpu_backend();
  const float dloss = 0.37f;
  uint64_t seed = 20;
  for (const auto& k : kSlices) {
    SliceCase c(k[0], k[1], k[2], k[3], seed++);
    // The group's statistics, as given to the pass (any positive sums and finite maxes and targets will do).
    auto maxes = randn(c.N, seed++, 1.0, 3.0), target = randn(c.N, seed++);
    std::vector<float> sums(c.N);
    for (int i = 0; i < c.N; i++) sums[i] = static_cast<float>(5.0 + i);
    std::vector<double> want_loss(c.N), loss_bound(c.N), want_dl(c.logits.size(), 0.0), dl_bound(c.logits.size(), 0);
    for (int i = 0; i < c.N; i++) {
      const double logS = std::log(static_cast<double>(sums[i]));
      want_loss[i] = logS + maxes[i] - target[i];
      loss_bound[i] = kUnitRoundoff * (4 * std::fabs(logS) + std::fabs(logS + maxes[i]) + std::fabs(want_loss[i]));
      for (int j = 0; j < c.valid; j++) {
        const double d = static_cast<double>(c.x(i, j)) - maxes[i], p = std::exp(d) / sums[i];
        const size_t at = static_cast<size_t>(i) * c.Vs + j;
        want_dl[at] = dloss * (p - (c.hot(i, j) ? 1.0 : 0.0));
        dl_bound[at] = dloss * p * (6 * kUnitRoundoff + kUnitRoundoff * std::fabs(d)) +
                       (c.hot(i, j) ? kUnitRoundoff * std::fabs(want_dl[at]) : 0.0);
      }  // padding columns: exactly 0, bound 0
    }
    auto dl = c.logits;
    std::vector<float> losses(c.N, NAN), losses_only(c.N, NAN);
    double total = 0.5;  // backward adds the row sum of its losses to it
    be->classifier_slice_backward(dl.data(), losses.data(), &total, maxes.data(), sums.data(), target.data(),
                                  c.targets.data(), c.lo, c.valid, dloss, c.N, c.Vs);
    EXPECT_TRUE(all_within(losses, want_loss, loss_bound)) << "valid=" << c.valid;
    EXPECT_TRUE(all_within(dl, want_dl, dl_bound)) << "valid=" << c.valid;
    double row_order = 0;
    for (int i = 0; i < c.N; i++) row_order += losses[i];  // the same doubles in the same order: exact
    EXPECT_EQ(total, 0.5 + row_order);
    // Without dlogits: the same losses, and no total when loss_sum is null.
    be->classifier_slice_backward(nullptr, losses_only.data(), nullptr, maxes.data(), sums.data(), target.data(),
                                  c.targets.data(), c.lo, c.valid, dloss, c.N, c.Vs);
    EXPECT_EQ(losses_only, losses);
  }
}

TEST(ClassifierSlice, TargetsOutsideTheVocabAndBadSlicesAreErrors) {
  auto be = cpu_backend();
  std::vector<float> logits(2 * 8, 0.0f), a(2), b(2);
  std::vector<int> at_v{1, 5}, negative{-1, 0}, fine{0, 1};  // V = 5: id 5 is padding, not a token
  EXPECT_THROW(be->classifier_slice_stats(a.data(), b.data(), logits.data(), at_v.data(), 0, 5, 2, 8, 5), gpt::Error);
  EXPECT_THROW(be->classifier_slice_stats(a.data(), b.data(), logits.data(), negative.data(), 0, 5, 2, 8, 5),
               gpt::Error);
  EXPECT_THROW(be->classifier_slice_stats(a.data(), b.data(), logits.data(), fine.data(), 0, 9, 2, 8, 5), gpt::Error);
  EXPECT_THROW(be->classifier_slice_sumexp(a.data(), logits.data(), b.data(), -1, 2, 8), gpt::Error);
}

// ---- the group identity ------------------------------------------------------------------------------------
// The whole (N, Vp) logits split into S column slices of Vs = Vp / S, slice s holding vocabulary [s Vs, (s+1) Vs)
// with valid_s = clamp(V - s Vs, 0, Vs) real columns. What differs from classifier_backward, and by how much:
//  - M: the max of the slices' maxes is the max of the V logits: exact, the same float.
//  - t: one slice's target logit plus zeros: exact.
//  - each e_j = fast_exp(x_j - M) is then the same float in both (fast_exp is a pure function of its float
//    argument), so the two exp-sums add the same V terms
//    e_j >= 0 in different orders (the whole row at once; or each slice's, then the S partial sums on the host).
//    Any order is within gamma_(V-1) S* of their exact sum S* (Higham), so |S_group - S_whole| <= 2 gamma_(V-1)
//    S* and the two logs differ by at most g = 2 gamma_(V-1) / (1 - gamma_(V-1)).
//  - loss = (log S + M) - t: the sides' own roundings (4u |log S|, u |log S + M|, u |loss|) twice, plus g.
//  - dlogit = e_j * (dloss / S) [- dloss]: the quotients differ by g plus a rounding on each side (2u), the
//    products by a rounding on each side (2u); the target column adds u |dlogit| on each side.
// First order in u (the u^2 terms are far below these bounds at V <= 1000).
void check_group(int N, int V, int Vp, int S, uint64_t seed) {
  ASSERT_EQ(Vp % S, 0);
  const int Vs = Vp / S;
  auto be = cpu_backend();
  auto whole = slice_logits(N, V, Vp, 3.0, seed);
  std::vector<int> targets(N);
  Rng rng(seed + 1);
  for (auto& t : targets) t = static_cast<int>(rng.next_u64() % V);
  targets[0] = 0, targets[N - 1] = V - 1;
  const float dloss = 1.0f / N;

  auto want_dl = whole;
  std::vector<float> want_loss(N);
  be->classifier_backward(want_dl.data(), want_loss.data(), nullptr, targets.data(), dloss, N, V, Vp);

  // Each rank's columns, its statistics, the group's reductions in rank order, then each rank's backward.
  std::vector<std::vector<float>> part(S, std::vector<float>(static_cast<size_t>(N) * Vs));
  std::vector<int> valid(S);
  std::vector<float> M(N, -INFINITY), T(N, 0.0f), Ssum(N, 0.0f), m(N), t(N), s(N);
  for (int r = 0; r < S; r++) {
    valid[r] = std::clamp(V - r * Vs, 0, Vs);
    for (int i = 0; i < N; i++)
      std::copy_n(&whole[static_cast<size_t>(i) * Vp + r * Vs], Vs, &part[r][static_cast<size_t>(i) * Vs]);
    be->classifier_slice_stats(m.data(), t.data(), part[r].data(), targets.data(), r * Vs, valid[r], N, Vs, V);
    for (int i = 0; i < N; i++) M[i] = std::max(M[i], m[i]), T[i] += t[i];
  }
  for (int r = 0; r < S; r++) {
    be->classifier_slice_sumexp(s.data(), part[r].data(), M.data(), valid[r], N, Vs);
    for (int i = 0; i < N; i++) Ssum[i] += s[i];
  }
  std::vector<float> losses(N), first_losses;
  for (int r = 0; r < S; r++) {
    be->classifier_slice_backward(part[r].data(), losses.data(), nullptr, M.data(), Ssum.data(), T.data(),
                                  targets.data(), r * Vs, valid[r], dloss, N, Vs);
    if (r == 0) first_losses = losses;
    EXPECT_EQ(losses, first_losses) << "every rank computes the same losses from the same statistics";
  }

  // The bounds, from a double evaluation of the same row.
  const double u = kUnitRoundoff, g = 2 * gamma_n(V - 1) / (1 - gamma_n(V - 1));
  std::vector<double> loss_ref(N), loss_bound(N), dl_ref(whole.size()), dl_bound(whole.size());
  for (int i = 0; i < N; i++) {
    const float* x = &whole[static_cast<size_t>(i) * Vp];
    const double mx = *std::max_element(x, x + V);
    double sum = 0;
    for (int j = 0; j < V; j++) sum += std::exp(x[j] - mx);
    const double logS = std::log(sum), loss = logS + mx - x[targets[i]];
    loss_ref[i] = want_loss[i];
    loss_bound[i] = g + 2 * u * (4 * std::fabs(logS) + std::fabs(logS + mx) + std::fabs(loss));
    for (int j = 0; j < Vp; j++) {
      const size_t at = static_cast<size_t>(i) * Vp + j;
      dl_ref[at] = want_dl[at];
      if (j >= V) continue;  // padding: exactly 0 in both, bound 0
      const double p = std::exp(x[j] - mx) / sum, hot = j == targets[i] ? 1.0 : 0.0;
      dl_bound[at] = dloss * p * (g + 4 * u) + 2 * u * std::fabs(dloss * (p - hot)) * hot;
    }
  }
  std::vector<float> got_dl(whole.size());
  for (int r = 0; r < S; r++)
    for (int i = 0; i < N; i++)
      std::copy_n(&part[r][static_cast<size_t>(i) * Vs], Vs, &got_dl[static_cast<size_t>(i) * Vp + r * Vs]);
  EXPECT_TRUE(all_within(losses, loss_ref, loss_bound)) << "V=" << V << " Vp=" << Vp << " S=" << S;
  EXPECT_TRUE(all_within(got_dl, dl_ref, dl_bound)) << "V=" << V << " Vp=" << Vp << " S=" << S;
}

TEST(ClassifierSlice, GroupOfTwoSlicesEqualsTheWholeClassifier) {
  check_group(5, 23, 24, 2, 30);      // the padding in the last slice
  check_group(7, 1000, 1008, 2, 31);  // wide rows
}

TEST(ClassifierSlice, GroupOfThreeSlicesEqualsTheWholeClassifier) {
  check_group(5, 23, 24, 3, 40);
  check_group(7, 1000, 1008, 3, 41);
  check_group(4, 13, 24, 3, 42);  // the last slice is all padding (valid = 0)
}

}  // namespace
}  // namespace gpt::test
