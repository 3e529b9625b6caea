// --reduce-dtype bf16: gradients reduce-scattered (all-reduced) in bf16, against independent references.
//  - The CPU backend's fp32 <-> bf16 conversions against hand-worked bit patterns (ties to even, overflow,
//    NaN, exact widening).
//  - The MPI communicator's bf16 reduce-scatter and all-reduce against a host computation in double: each
//    rank's contribution rounded to bf16 by a separate method (frexp + nearbyint), summed exactly, divided
//    by N. Error bound (u = 2^-8, the unit roundoff of bf16's 8-bit significand; r_k the rounded
//    contributions, S = sum_k r_k):
//      the N-1 combines each round to bf16 in some tree order, so |sum_hat - S| <= g * sum|r_k| with
//      g = (N-1)u / (1 - (N-1)u) (Higham, Accuracy and Stability of Numerical Algorithms, eq. 4.4);
//      avg divides in fp32 (relative 2^-24) and rounds to bf16 once more (relative u), so
//      |avg_hat - S/N| <= [g + (1 + g)(1 + u)(u + 2^-24)] * sum|r_k| / N, about N*u*sum|r_k|/N.
//    Values stay far from under- and overflow, where these relative bounds would not hold.
//  - Exact cases whose result does not depend on the combine order: ties of a two-term sum.
//  - The communication ledger: reduce-scatter bytes exactly half of fp32's, all-gather bytes unchanged,
//    against the closed forms of test_fsdp_ledgers.cpp with 2 bytes per gradient element.
//  - Training: a d2-shaped model trained 12 steps with bf16 reduction tracks the fp32-reduction run
//    (losses within 1e-3 relative) and is not identical to it (with one rank nothing is communicated, so
//    the two must be bit-identical).
//  - The flag: `gpt train --help` lists it, a bad value is one "error:" line naming it, exit non-zero.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "tests/common/test_paths.h"
#include "tests/fsdp/fsdp_run.h"
#include "tests/fsdp/mpi_world.h"
#include "tests/common/tiny_config.h"

namespace gpt::test {
namespace {

constexpr double kU = 1.0 / 256;  // bf16 unit roundoff 2^-8

// bf16 rounding computed without bit tricks: the significand scaled to 8 bits and rounded by nearbyint,
// which rounds ties to even in the default rounding mode. Valid for normal, finite x.
double ref_bf16(double x) {
  if (x == 0) return x;
  int e = 0;
  const double m = std::frexp(x, &e);  // x = m * 2^e, 0.5 <= |m| < 1
  return std::ldexp(std::nearbyint(std::ldexp(m, 8)), e - 8);
}

float widen(uint16_t h) {  // bf16 is the top half of an fp32
  const uint32_t bits = (uint32_t)h << 16;
  float x;
  std::memcpy(&x, &bits, 4);
  return x;
}

uint16_t bits_of(float x) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  return (uint16_t)(u >> 16);  // only for values exactly representable in bf16
}

// Contribution of rank r to element i: spread over magnitudes 2^-4 .. 2^4, with low bits set so that
// the rounding to bf16 matters, and signs mixed so that the sums cancel.
float contribution(int r, size_t i) {
  uint64_t x = (uint64_t)r * 0x9e3779b97f4a7c15ULL + i * 0xbf58476d1ce4e5b9ULL + 7;
  x ^= x >> 31;
  x *= 0x94d049bb133111ebULL;
  x ^= x >> 29;
  const double unit = (double)(x % 2000001) / 1000000.0 - 1.0;  // [-1, 1]
  const double v = std::ldexp(unit, (int)(i % 9) - 4);
  return (float)(std::fabs(v) < 1e-3 ? 1e-3 + v : v);
}

double bound_factor(int N) {
  const double g = (N - 1) * kU / (1 - (N - 1) * kU);
  return g + (1 + g) * (1 + kU) * (kU + std::ldexp(1.0, -24));
}

TEST(ReduceDtype, CpuBackendRoundsToNearestEven) {
  auto be = make_backend("cpu");
  const float in[] = {1.0f,
                      1.0f + 0x1p-8f,            // halfway between 1 and 1 + 2^-7: ties to even -> 1
                      1.0f + 3 * 0x1p-8f,        // halfway between 1 + 2^-7 and 1 + 2^-6: -> 1 + 2^-6
                      1.0f + 0x1p-8f + 0x1p-20f, // just above the tie: up
                      -2.5f,
                      INFINITY,
                      3.4028235e38f,             // FLT_MAX: rounds past the largest bf16 -> inf
                      0x1p-130f};                // subnormal 0x00080000: its top half, exactly
  const uint16_t want[] = {0x3F80, 0x3F80, 0x3F82, 0x3F81, 0xC020, 0x7F80, 0x7F80, 0x0008};
  constexpr size_t n = sizeof(in) / sizeof(in[0]);
  uint16_t got[n];
  be->f32_to_bf16(got, in, n);
  for (size_t i = 0; i < n; i++) EXPECT_EQ(got[i], want[i]) << "element " << i << " = " << in[i];
  const float nan_in = NAN;
  uint16_t nan_out = 0;
  be->f32_to_bf16(&nan_out, &nan_in, 1);
  EXPECT_TRUE(std::isnan(widen(nan_out))) << std::hex << nan_out;
  float back[n];
  be->bf16_to_f32(back, want, n);
  const float exact[] = {1.0f, 1.0f, 1.015625f, 1.0078125f, -2.5f, INFINITY, INFINITY, 0x1p-130f};
  for (size_t i = 0; i < n; i++) EXPECT_EQ(back[i], exact[i]) << "element " << i;
}

// Rank r's bf16 send buffer (N * count): contribution(r, j) for global element j.
std::vector<uint16_t> send_words(int r, size_t total) {
  std::vector<uint16_t> w(total);
  for (size_t j = 0; j < total; j++) w[j] = bits_of((float)ref_bf16(contribution(r, j)));
  return w;
}

// The average over ranks of element j, and sum_k |r_k|, in double from the independently rounded inputs.
void reference(int N, size_t j, double* avg, double* abs_sum) {
  double s = 0, a = 0;
  for (int k = 0; k < N; k++) {
    const double r = ref_bf16(contribution(k, j));
    s += r;
    a += std::fabs(r);
  }
  *avg = s / N;
  *abs_sum = a;
}

TEST(ReduceDtype, Bf16ReduceScatterMatchesHostReference) {
  Communicator& w = world();
  const int N = w.world(), r = w.rank();
  const size_t count = 1000;
  std::vector<uint16_t> in = send_words(r, N * count), out(count);
  w.reduce_scatter(out.data(), in.data(), count, DType::BF16, ReduceOp::avg);
  const double f = bound_factor(N);
  int beyond = 0;
  for (size_t i = 0; i < count; i++) {
    double avg, abs_sum;
    reference(N, r * count + i, &avg, &abs_sum);
    const double err = std::fabs((double)widen(out[i]) - avg);
    if (err > f * abs_sum / N) beyond++;
    if (beyond == 1 && err > f * abs_sum / N)
      ADD_FAILURE() << "element " << i << ": got " << widen(out[i]) << ", reference " << avg << ", bound "
                    << f * abs_sum / N;
  }
  EXPECT_EQ(beyond, 0) << "of " << count << " elements at N=" << N;
}

TEST(ReduceDtype, Bf16AllReduceMatchesHostReferenceAndAgreesAcrossRanks) {
  Communicator& w = world();
  const int N = w.world(), r = w.rank();
  const size_t count = 999;  // not a multiple of N = 2, 4
  std::vector<uint16_t> buf = send_words(r, count);
  w.all_reduce(buf.data(), count, DType::BF16, ReduceOp::avg);
  const double f = bound_factor(N);
  int beyond = 0;
  for (size_t i = 0; i < count; i++) {
    double avg, abs_sum;
    reference(N, i, &avg, &abs_sum);
    beyond += std::fabs((double)widen(buf[i]) - avg) > f * abs_sum / N;
  }
  EXPECT_EQ(beyond, 0) << "of " << count << " elements at N=" << N;
  // every rank holds the same bits (replicas must not drift apart)
  std::vector<uint16_t> all((size_t)N * count);
  w.all_gather(all.data(), buf.data(), count, DType::BF16);
  int differ = 0;
  for (int k = 0; k < N; k++) differ += std::memcmp(&all[k * count], buf.data(), count * 2) != 0;
  EXPECT_EQ(differ, 0);
}

// Two non-zero terms (ranks 0 and 1), the rest zeros: whatever the combine order, the sum is the correctly
// rounded bf16 sum of the two, so ties must go to even.
TEST(ReduceDtype, Bf16SumRoundsTiesToEven) {
  Communicator& w = world();
  const int N = w.world(), r = w.rank();
  if (N < 2) GTEST_SKIP() << "needs two ranks";
  const float a[] = {1.0f, 1.0f, 1.0f, -3.0f};  // rank 0's terms
  const float b[] = {0x1p-8f, 3 * 0x1p-8f, 0x1p-7f, 0x1p-6f};  // rank 1's terms
  const uint16_t want[] = {0x3F80,   // 1 + 2^-8: tie, down to 1
                           0x3F82,   // 1 + 3*2^-8: tie, up to 1 + 2^-6
                           0x3F81,   // 1 + 2^-7: exact
                           0xC03F};  // -3 + 2^-6 = -2.984375 exact (bf16 0xC03F = -2.984375)
  const size_t n = 4;
  std::vector<uint16_t> buf(n, 0);
  for (size_t i = 0; i < n; i++) buf[i] = r == 0 ? bits_of(a[i]) : r == 1 ? bits_of(b[i]) : 0;
  w.all_reduce(buf.data(), n, DType::BF16, ReduceOp::sum);
  for (size_t i = 0; i < n; i++) EXPECT_EQ(buf[i], want[i]) << "element " << i;
}

GPTConfig d2_shaped() {
  GPTConfig c = tiny_config(2, 2, 128, 64, 257);
  return c;
}

RunSpec spec(ShardStrategy st, DType reduce, int N) {
  RunSpec s;
  s.cfg = d2_shaped();
  s.fsdp.strategy = st;
  if (st == ShardStrategy::hybrid) s.fsdp.shard_group = 2;
  s.fsdp.reduce_dtype = reduce;
  s.T = 32;
  s.global_seqs = 2 * N;
  return s;
}

struct Traffic {
  int64_t ag, rs, ar;
};
Traffic one_step(ShardStrategy st, DType reduce) {
  ShardedRun run(spec(st, reduce, world().world()), world());
  run.engine->begin_traffic_step();
  run.train_step();
  const CommCounters c = run.engine->traffic_step();
  return {c.bytes_sent[(int)CollKind::all_gather], c.bytes_sent[(int)CollKind::reduce_scatter],
          c.bytes_sent[(int)CollKind::all_reduce]};
}

TEST(ReduceDtype, LedgerHalvesGradientTraffic) {
  const int N = world().world();
  const Layout l(d2_shaped());
  int64_t psi = 0, psi_root = 0;  // padded to a multiple of N
  for (int u = 0; u < l.num_units(); u++) psi += (l.unit(u).numel + N - 1) / N * N;
  psi_root = (l.unit(0).numel + N - 1) / N * N;
  for (ShardStrategy st : {ShardStrategy::full, ShardStrategy::grad_op}) {
    const Traffic f32 = one_step(st, DType::F32), bf16 = one_step(st, DType::BF16);
    const int64_t gathered = st == ShardStrategy::full ? 2 * psi - psi_root : psi;
    EXPECT_EQ(f32.rs, 4 * psi * (N - 1) / N) << FsdpOptions::name(st);
    EXPECT_EQ(bf16.rs, 2 * psi * (N - 1) / N) << FsdpOptions::name(st);
    EXPECT_EQ(2 * bf16.rs, f32.rs);
    EXPECT_EQ(bf16.ag, 4 * gathered * (N - 1) / N) << "the cpu gathers fp32 parameters either way";
    EXPECT_EQ(bf16.ag, f32.ag);
    EXPECT_EQ(bf16.ar + f32.ar, 0);
  }
  const Traffic ddp = one_step(ShardStrategy::none, DType::BF16);
  int64_t ar = 0;  // one all-reduce per unit, ring figure 2*c*2*(N-1)/N each
  for (int u = 0; u < l.num_units(); u++) ar += 2 * l.unit(u).numel * 2 * (N - 1) / N;
  EXPECT_EQ(ddp.ar, ar);
  EXPECT_EQ(ddp.ag + ddp.rs, 0);
  if (N % 2 == 0) {  // hybrid, groups of G = 2: bf16 reduce-scatter in the group, bf16 all-reduce across
    const int G = 2, R = N / G;
    int64_t rs = 0, ar_h = 0;
    for (int u = 0; u < l.num_units(); u++) {
      const int64_t shard = (l.unit(u).numel + G - 1) / G;
      rs += shard * 2 * (G - 1);
      ar_h += 2 * shard * 2 * (R - 1) / R;
    }
    const Traffic h = one_step(ShardStrategy::hybrid, DType::BF16);
    EXPECT_EQ(h.rs, rs);
    EXPECT_EQ(h.ar, ar_h);
  }
}

// Relative tolerance of the bf16-reduction losses: each reduced gradient element differs from the fp32
// one by at most about N*2^-8 times the mean magnitude of the ranks' terms (bound above), and AdamW moves each weight by about lr along
// m/sqrt(v), a ratio such a perturbation barely changes, so the weights of the two runs drift apart by a
// small fraction of lr per step and the losses by far less than 0.1% over 12 steps (measured: at most
// 6e-5 relative at N = 2, 3, 4: a margin of 15).
constexpr double kLossRelTol = 1e-3;

TEST(ReduceDtype, TrainingTracksTheFp32Reduction) {
  Communicator& w = world();
  const int N = w.world();
  ShardedRun f32(spec(ShardStrategy::full, DType::F32, N), w);
  ShardedRun bf16(spec(ShardStrategy::full, DType::BF16, N), w);
  int identical = 0;
  const int steps = 12;
  for (int i = 0; i < steps; i++) {
    const float a = f32.train_step(), b = bf16.train_step();
    EXPECT_NEAR(b, a, kLossRelTol * std::fabs(a)) << "step " << i;
    identical += a == b;
  }
  if (N == 1) {  // nothing is communicated, so nothing is rounded
    EXPECT_EQ(identical, steps);
    EXPECT_EQ(f32.params(), bf16.params());
  } else {
    EXPECT_LT(identical, steps) << "the bf16 reduction changed nothing";
    EXPECT_NE(f32.params(), bf16.params());
  }
}

TEST(ReduceDtype, FlagIsListedAndValidated) {
  if (world().rank() != 0) return;  // one process is enough, and no collective follows
  // the child must not believe it is an MPI rank: without the launcher's size variables it runs alone
  const std::string gpt = "env -u OMPI_COMM_WORLD_SIZE -u PMI_SIZE -u PMIX_RANK OMP_NUM_THREADS=1 timeout 60 " + gpt_binary();
  std::string out;
  EXPECT_EQ(run_command(gpt + " train --help", &out), 0) << out;
  EXPECT_NE(out.find("--reduce-dtype fp32|bf16"), std::string::npos) << out;
  const int code = run_command(gpt + " train --config d2 --train /nonexistent --reduce-dtype fp16", &out);
  EXPECT_NE(code, 0) << out;
  EXPECT_LT(code, 128) << "crashed: " << out;
  EXPECT_EQ(out, "error: --reduce-dtype: expected fp32 or bf16, got 'fp16'\n");
}

}  // namespace
}  // namespace gpt::test
