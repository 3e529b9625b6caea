// The fp32 noise floor of a training run, and parity bounds derived from it (not chosen).
//
// Why: N ranks compute the same mathematical step as one process, but their fp32 arithmetic runs in
// another order, so their results differ in the last bits, and 20 steps of AdamW amplify that (most on
// weights whose gradient is near AdamW's eps, where the update follows the gradient's low bits). How much
// depends on the CPU (our kernels are vectorised 16 lanes wide with AVX-512, 8 with AVX2, 4 without) and
// is not a constant one can choose. So the tests measure it on the build and CPU they run on.
//
// What the N-rank run does differently from one process, and how one process does the same:
//  1. It sums the batch in another association: each rank's rows, then across ranks. One process does
//     that with gradient accumulation: the global batch in a micro-steps instead of 1.
//  2. It splits the mean over the batch in two: backward scales by 1/(rows per rank), and the reduction
//     divides by N. Unless N is a power of 2 this changes the roundings of every value of the backward
//     (at N = 3 the scale 1/(4 rows * T * 2 micro-steps) is an exact 1/64, where one process has the
//     rounded 1/192). Sums in another order (1) leave those bits alone, so measuring only 1 underestimates
//     N = 3 by a factor 4 (measured on AVX-512: 2.6e-6 against 9.6e-6 after 20 d4 steps). One process
//     does the same with RunSpec::norm_split = c: backward scaled by c/rows, the gradient divided by c.
// The floor's samples are the reference (1 micro-step, no split) against 5 runs that do both, each with
// its own accumulation a and split c: (a, c) = (2, 3), (3, 5), (4, 7), (6, 9), (8, 11) (c not a power of 2,
// so each rounds differently; a among the divisors of the batch). The floor is the largest difference
// from the reference over them: per step for the losses (an envelope: the largest up to that step, since
// a difference, once made, is carried and amplified) and at the end for the parameters. It is never less
// than what two correct fp32 runs may always differ by: each rounds its final loss and every parameter
// once (relative error <= u = 2^-24 each), so 2u.
//
// The bound is kParityMultiple x floor; why that multiple:
//  - Extra roundings (a factor 2). Against a sample, the N-rank run with A micro-steps adds e <= 1
//    rounding per gradient element: with sync it divides by N once per micro-step (A = 2 times) where the
//    sample divides once (hybrid divides by G and by N/G, but in the tested worlds N <= 4 one of the two
//    is 1 or both are powers of 2). The global grad norm and the loss are summed in another order too, but
//    the norm scales every gradient alike (AdamW's m/sqrt(v) cancels that) and the loss is rounded to fp32
//    once (the 2u above). Every path has n >= 1 roundings per element, and the worst-case error of a sum
//    with n roundings is gamma_n = n*u/(1 - n*u) times the sum of magnitudes (Higham, Accuracy and
//    Stability of Numerical Algorithms, eq. 4.4), so n + e roundings instead of n can grow it by at most
//    (n + e)/n <= 2 (the probabilistic estimate, sqrt((n + e)/n), by less).
//  - Estimating a floor from a few samples (a factor 8). The N-rank difference is one more draw of the
//    same kind as the 5 samples' differences (for N a power of 2, of a smaller kind: 1 only). In the
//    worst case a difference is one signed number (a loss is; the parameters' difference has at least one
//    degree of freedom, and more only narrow its spread), a folded normal. The chance that a draw exceeds
//    c times the largest of 5 independent ones is the integral of P(|Z| > c x) against the density of
//    the maximum of 5 |Z|:
//      c = 2: 2.5e-2   3: 5.2e-3   5: 5.5e-4   8: 5.8e-5   10: 2.0e-5
//    c = 8 keeps a false failure below 1e-4 per check (the envelope gives the losses of later steps many
//    more samples than 5, so they are safer still).
// A real sharding bug moves losses and parameters by far more. Injected into the d2 run at N = 2 (one
// unit's gradient summed instead of averaged; one unit's reduction lost once; one wrong sequence in one
// step; the head unit's gradient halved once), each went 4.8 to 1200 times past this bound.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "src/dist/comm_world.h"
#include "tests/fsdp/fsdp_run.h"

namespace gpt::test {

constexpr double kFp32Unit = 0x1p-24;           // u, the unit roundoff of fp32
constexpr double kFloorMin = 2 * kFp32Unit;     // two runs, one final rounding each
constexpr double kRoundingExcess = 2;           // (n + e)/n, e <= 1 <= n: see above
constexpr double kSamplingMargin = 8;           // P(one more draw > 8 x max of 5) < 1e-4: see above
constexpr double kParityMultiple = kRoundingExcess * kSamplingMargin;

// Relative L2 distance of two parameter sets, per unit (the largest over units).
inline double max_rel_diff(const std::vector<std::vector<float>>& a, const std::vector<std::vector<float>>& b) {
  double worst = 0;
  for (size_t u = 0; u < a.size(); u++) {
    double d = 0, n = 0;
    for (size_t i = 0; i < a[u].size(); i++) {
      d += (double)(a[u][i] - b[u][i]) * (a[u][i] - b[u][i]);
      n += (double)b[u][i] * b[u][i];
    }
    worst = std::max(worst, std::sqrt(d / (n + 1e-30)));
  }
  return worst;
}

inline double rel(double a, double b) { return std::fabs(a - b) / std::fabs(b); }

struct Trajectory {
  std::vector<float> losses;                 // per step
  std::vector<std::vector<float>> params;    // after the last step, per unit
};

// One process, the spec's global batch in `accum` micro-steps with the mean split by `split`, `steps`
// optimizer steps.
inline Trajectory single_process_run(RunSpec spec, int accum, int split, int steps) {
  spec.accum = accum;
  spec.norm_split = split;
  spec.fsdp = FsdpOptions{};
  auto single = make_single_communicator();
  ShardedRun run(spec, *single);
  Trajectory t;
  for (int s = 0; s < steps; s++) t.losses.push_back(run.train_step());
  t.params = run.params();
  return t;
}

struct NoiseFloor {
  Trajectory ref;                    // one process, one micro-step
  std::vector<int> accums, splits;   // the samples: micro-steps and RunSpec::norm_split
  std::vector<double> loss_sample;   // per sample: its largest relative loss difference, any step
  std::vector<double> param_sample;  // per sample: its relative parameter difference at the end
  std::vector<double> loss;          // per step: the floor of the relative loss difference
  double params = 0;                 // the floor of the relative parameter difference

  double loss_bound(int step) const { return kParityMultiple * loss[step]; }
  double params_bound() const { return kParityMultiple * params; }
};

// `t`, as rank `root` holds it, on every rank of `world` (the others' t is replaced).
inline void broadcast_trajectory(Trajectory& t, int root, Communicator& world) {
  std::vector<uint64_t> sizes = {t.losses.size(), t.params.size()};  // losses, units, then each unit's
  for (const std::vector<float>& p : t.params) sizes.push_back(p.size());
  uint64_t count = sizes.size();
  world.broadcast(&count, sizeof count, root);
  sizes.resize(count);
  world.broadcast(sizes.data(), sizeof(uint64_t) * count, root);
  t.losses.resize(sizes[0]);
  t.params.resize(sizes[1]);
  world.broadcast(t.losses.data(), sizeof(float) * sizes[0], root);
  for (size_t u = 0; u < sizes[1]; u++) {
    t.params[u].resize(sizes[2 + u]);
    world.broadcast(t.params[u].data(), sizeof(float) * sizes[2 + u], root);
  }
}

// Measures the floor of `spec` (see above). The reference and the samples are shared out over the ranks of
// `world` (run j on rank j mod N, the reference being run 0), the reference is broadcast, and then the
// samples' differences, so every rank returns the same floor and no run is made twice.
inline NoiseFloor measure_noise_floor(const RunSpec& spec, int steps, Communicator& world) {
  NoiseFloor f;
  for (int a : {2, 3, 4, 6, 8, 12, 24})
    if (spec.global_seqs % a == 0 && f.accums.size() < 5) f.accums.push_back(a);
  for (size_t i = 0; i < f.accums.size(); i++) f.splits.push_back(3 + 2 * (int)i);
  const int R = (int)f.accums.size(), N = world.world();
  auto mine = [&](int run) { return run % N == world.rank(); };  // run 0: the reference; 1 + i: sample i
  if (mine(0)) f.ref = single_process_run(spec, 1, 1, steps);
  std::vector<Trajectory> samples(R);
  for (int i = 0; i < R; i++)
    if (mine(1 + i)) samples[i] = single_process_run(spec, f.accums[i], f.splits[i], steps);
  broadcast_trajectory(f.ref, 0, world);
  std::vector<double> diffs((size_t)R * (steps + 1), 0.0);  // per sample: steps loss diffs, params diff
  for (int i = 0; i < R; i++) {
    double* d = &diffs[(size_t)i * (steps + 1)];
    if (mine(1 + i)) {
      for (int s = 0; s < steps; s++) d[s] = rel(samples[i].losses[s], f.ref.losses[s]);
      d[steps] = max_rel_diff(samples[i].params, f.ref.params);
    }
  }
  for (int i = 0; i < R; i++)
    world.broadcast(&diffs[(size_t)i * (steps + 1)], sizeof(double) * (steps + 1), (1 + i) % N);
  f.loss.assign(steps, kFloorMin);
  f.params = kFloorMin;
  for (int i = 0; i < R; i++) {
    const double* d = &diffs[(size_t)i * (steps + 1)];
    f.loss_sample.push_back(*std::max_element(d, d + steps));
    f.param_sample.push_back(d[steps]);
    double envelope = 0;
    for (int s = 0; s < steps; s++) {
      envelope = std::max(envelope, d[s]);
      f.loss[s] = std::max(f.loss[s], envelope);
    }
    f.params = std::max(f.params, d[steps]);
  }
  return f;
}

// The worst ratio of an N-rank run's differences to their bounds: losses[s] for s in [first, last),
// then the final parameters.
struct ParityMeasure {
  double loss_diff = 0, loss_floor = 0, loss_ratio = 0;  // at the step of the worst ratio
  double params_diff = 0, params_ratio = 0;
};

inline ParityMeasure measure_parity(const NoiseFloor& f, const std::vector<float>& losses, int first,
                                    const std::vector<std::vector<float>>& params) {
  ParityMeasure m;
  for (size_t k = 0; k < losses.size(); k++) {
    const int s = first + (int)k;
    const double d = rel(losses[k], f.ref.losses[s]), r = d / f.loss_bound(s);
    if (r >= m.loss_ratio) m.loss_diff = d, m.loss_floor = f.loss[s], m.loss_ratio = r;
  }
  m.params_diff = max_rel_diff(params, f.ref.params);
  m.params_ratio = m.params_diff / f.params_bound();
  return m;
}

// One line for scripts/isa_matrix.sh (rank 0 prints it): the floor, the N-rank difference and its ratio
// to the bound (pass <= 1), for losses (worst step) and final parameters.
inline void print_parity(const std::string& label, int ranks, const NoiseFloor& f, const ParityMeasure& m) {
  std::printf("[parity] %s ranks=%d multiple=%g loss_floor=%.3e loss_diff=%.3e loss_ratio=%.3f "
              "params_floor=%.3e params_diff=%.3e params_ratio=%.3f\n",
              label.c_str(), ranks, kParityMultiple, m.loss_floor, m.loss_diff, m.loss_ratio, f.params,
              m.params_diff, m.params_ratio);
  std::fflush(stdout);
}

inline void print_floor(const std::string& label, const NoiseFloor& f) {
  std::printf("[parity-floor] %s", label.c_str());
  for (size_t i = 0; i < f.accums.size(); i++)
    std::printf(" a%dc%d=%.3e/%.3e", f.accums[i], f.splits[i], f.loss_sample[i], f.param_sample[i]);
  std::printf(" (loss/params)\n");
  std::fflush(stdout);
}

}  // namespace gpt::test
