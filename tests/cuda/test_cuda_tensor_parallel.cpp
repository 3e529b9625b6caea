// Why: the tensor-parallel ops (backend.h's section: the vocab-slice embedding and loss, the position embedding of
// a row range, a bias added after a reduction) have CUDA twins that must agree with the cpu kernels and with the
// math. Each test is the three-way check of twin_util.h (cuda vs a double reference, cpu vs the reference, cuda
// vs cpu), with bounds derived as at the top of test_cuda_ops.cpp (u = 2^-24, ub = 2^-8, acc(K) for a K-term fp32
// sum in any order, bf16_out for the one bf16 rounding of a GPU output), on shapes that run both the 16-byte
// vector path and the one-element path. The gradients must repeat bit for bit on the GPU (no atomics), and the
// identities the model rests on hold on the GPU too: the slices and the rows give encoder_forward's and
// encoder_backward's results bit for bit, bias_backward gives matmul_backward's dbias bit for bit, and the loss
// passes run as a TP group give the whole classifier's losses and dlogits within its own bounds
// (ClassifierCase). Every test skips when no GPU is visible (the CudaTwin fixture) and uses only the Backend
// interface, so this file builds without CUDA and runs under the SIMT emulator (simt.CudaTwin.*).
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "tests/cuda/twin_util.h"

namespace gpt::test {
namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

std::string shape(const char* what, std::initializer_list<std::pair<const char*, int>> args) {
  std::string s = what;
  for (const auto& [name, v] : args) s += std::string(" ") + name + "=" + std::to_string(v);
  return s;
}

// A gradient table (rows, C), fp32, that starts at `start` and gets bf16 rows of dout added: the double sums, and
// the bound acc(k) * sum|terms| of an element that k rows are added to (k = 0: left exactly as it was). Both twins
// add k terms to the start: the cpu as one chain, the GPU as a sum of the k rows then one addition.
struct GradRef {
  std::vector<double> sum, abs_sum;
  std::vector<int> added;
  int C;
  GradRef(const std::vector<float>& start /*(rows,C)*/, int C_)
      : sum(start.begin(), start.end()), abs_sum(start.size()), added(start.size() / C_, 0), C(C_) {
    for (size_t k = 0; k < start.size(); k++) abs_sum[k] = std::fabs(start[k]);
  }
  void add(int row, const float* d /*(C)*/) {
    added[row]++;
    for (int c = 0; c < C; c++) {
      const size_t k = static_cast<size_t>(row) * C + c;
      sum[k] += d[c], abs_sum[k] += std::fabs(d[c]);
    }
  }
  std::vector<double> bound() const {
    std::vector<double> b(sum.size());
    for (size_t k = 0; k < b.size(); k++) b[k] = added[k / C] ? acc(added[k / C]) * abs_sum[k] : 0.0;
    return b;
  }
};

// ---- embedding slice --------------------------------------------------------------------------------------
// Tokens inside the slice [lo, lo + rows), at its edges, below and above it. A lookup is a copy: exact on both.
std::vector<int> slice_tokens(Rng& rng, int N, int Vp, int lo, int rows) {
  std::vector<int> tok(N);
  for (auto& t : tok) t = static_cast<int>(rng.next_u64() % Vp);
  tok[0] = lo, tok[1] = lo + rows - 1, tok[2] = lo - 1, tok[3] = lo + rows;
  return tok;
}

void check_embedding_slice_forward(Backend& gpu, Backend& cpu, int C, uint64_t seed) {
  const int N = 51, Vp = 64, lo = 16, rows = 24;
  Rng rng(seed);
  auto wte_rows = uniform_bf16(rng, static_cast<size_t>(rows) * C, -1, 1);
  auto tok = slice_tokens(rng, N, Vp, lo, rows);
  const size_t n = static_cast<size_t>(N) * C;
  std::vector<double> ref(n, 0.0), zero(n, 0.0);
  for (int i = 0; i < N; i++)
    if (tok[i] >= lo && tok[i] < lo + rows)
      for (int c = 0; c < C; c++)
        ref[static_cast<size_t>(i) * C + c] = wte_rows[static_cast<size_t>(tok[i] - lo) * C + c];
  auto run = [&](Backend& be) {
    DevBuf w = upload_compute(be, wte_rows), t = upload_ints(be, tok), out = poisoned_compute(be, n);
    be.embedding_slice_forward(out.get(), t.i32(), w.get(), lo, rows, N, C);
    return download_compute(be, out.get(), n);
  };
  expect_twins(shape("embedding_slice_forward", {{"C", C}}), run(gpu), run(cpu), ref, zero, zero);
}

TEST_F(CudaTwin, EmbeddingSliceForward) {
  check_embedding_slice_forward(*gpu, *cpu, 40, 301);  // vector path
  check_embedding_slice_forward(*gpu, *cpu, 36, 302);  // one element at a time
}

// The GPU groups the positions by token (encoder_backward's counting sort) and sums each group in position order.
void check_embedding_slice_backward(Backend& gpu, Backend& cpu, int N, int C, uint64_t seed) {
  const int Vp = 16, lo = 5, rows = 6;
  Rng rng(seed);
  auto dout = uniform_bf16(rng, static_cast<size_t>(N) * C, -1, 1);
  auto start = uniform_f32(rng, static_cast<size_t>(rows) * C, -1, 1);
  auto tok = slice_tokens(rng, N, Vp, lo, rows);
  GradRef ref(start, C);
  for (int i = 0; i < N; i++)
    if (tok[i] >= lo && tok[i] < lo + rows) ref.add(tok[i] - lo, &dout[static_cast<size_t>(i) * C]);
  std::vector<float> got[3];
  Backend* bes[3] = {&gpu, &cpu, &gpu};
  for (int k = 0; k < 3; k++) {
    Backend& be = *bes[k];
    DevBuf d = upload_compute(be, dout), t = upload_ints(be, tok), g = upload_f32(be, start);
    be.embedding_slice_backward(g.f32(), d.get(), t.i32(), lo, rows, N, C);
    got[k] = download_f32(be, g.get(), start.size());
  }
  const std::string tag = shape("embedding_slice_backward", {{"N", N}, {"C", C}});
  const auto bound = ref.bound();
  expect_twins(tag, got[0], got[1], ref.sum, bound, bound);  // fp32 outputs: the same bound
  EXPECT_EQ(got[0], got[2]) << tag << " must repeat bit for bit";
}

TEST_F(CudaTwin, EmbeddingSliceBackwardAccumulatesDeterministically) {
  check_embedding_slice_backward(*gpu, *cpu, 76, 36, 311);   // one element at a time, one tile of the rank kernel
  check_embedding_slice_backward(*gpu, *cpu, 400, 40, 312);  // vector path, four tiles
}

// ---- position embedding of a row range ----------------------------------------------------------------------
// Ranges that start inside the period, past it, wrap several times, or stay short of it. wpe's rows from T on
// are NaN: a wrong period reads one and fails.
struct RangeCase {
  int first, n, T;
};
const RangeCase kRanges[] = {{3, 9, 5}, {12, 4, 5}, {0, 2, 5}, {6, 37, 7}};

void check_position_forward(Backend& gpu, Backend& cpu, int C, const RangeCase& r, uint64_t seed) {
  const int maxT = r.T + 3;
  Rng rng(seed);
  auto x = uniform_bf16(rng, static_cast<size_t>(r.n) * C, -1, 1);
  auto wpe = uniform_bf16(rng, static_cast<size_t>(maxT) * C, -1, 1);
  std::fill(wpe.begin() + static_cast<size_t>(r.T) * C, wpe.end(), kNaN);
  std::vector<double> ref(x.size()), tc(x.size()), tg(x.size());
  for (int i = 0; i < r.n; i++)
    for (int c = 0; c < C; c++) {
      const size_t k = static_cast<size_t>(i) * C + c;
      ref[k] = static_cast<double>(x[k]) + wpe[static_cast<size_t>((r.first + i) % r.T) * C + c];
      tc[k] = kU * std::fabs(ref[k]);  // one fp32 addition
      tg[k] = bf16_out(ref[k], tc[k]);
    }
  auto run = [&](Backend& be) {
    DevBuf dx = upload_compute(be, x), dp = upload_compute(be, wpe);
    be.position_forward(dx.get(), dp.get(), r.first, r.n, r.T, C);
    return download_compute(be, dx.get(), x.size());
  };
  expect_twins(shape("position_forward", {{"C", C}, {"first", r.first}, {"n", r.n}, {"T", r.T}}), run(gpu), run(cpu),
               ref, tg, tc);
}

TEST_F(CudaTwin, PositionForwardRowRangeWrapsPastT) {
  uint64_t seed = 321;
  for (const RangeCase& r : kRanges) {
    check_position_forward(*gpu, *cpu, 40, r, seed++);  // vector path
    check_position_forward(*gpu, *cpu, 36, r, seed++);  // one element at a time
  }
}

void check_position_backward(Backend& gpu, Backend& cpu, int C, const RangeCase& r, uint64_t seed) {
  const int maxT = r.T + 3;
  Rng rng(seed);
  auto dout = uniform_bf16(rng, static_cast<size_t>(r.n) * C, -1, 1);
  auto start = uniform_f32(rng, static_cast<size_t>(maxT) * C, -1, 1);
  GradRef ref(start, C);
  for (int i = 0; i < r.n; i++) ref.add((r.first + i) % r.T, &dout[static_cast<size_t>(i) * C]);
  std::vector<float> got[3];
  Backend* bes[3] = {&gpu, &cpu, &gpu};
  for (int k = 0; k < 3; k++) {
    Backend& be = *bes[k];
    DevBuf d = upload_compute(be, dout), g = upload_f32(be, start);
    be.position_backward(g.f32(), d.get(), r.first, r.n, r.T, C);
    got[k] = download_f32(be, g.get(), start.size());
  }
  const std::string tag = shape("position_backward", {{"C", C}, {"first", r.first}, {"n", r.n}, {"T", r.T}});
  const auto bound = ref.bound();
  expect_twins(tag, got[0], got[1], ref.sum, bound, bound);
  EXPECT_EQ(got[0], got[2]) << tag << " must repeat bit for bit";
}

TEST_F(CudaTwin, PositionBackwardRowRangeAccumulatesDeterministically) {
  uint64_t seed = 331;
  for (const RangeCase& r : kRanges) {
    check_position_backward(*gpu, *cpu, 40, r, seed++);
    check_position_backward(*gpu, *cpu, 36, r, seed++);
  }
}

// The slices' lookups summed over the group (on the host: one nonzero per element, exact), then the positions of
// all rows, give encoder_forward's output bit for bit; the slices' gradients and the rows' give encoder_backward's.
TEST_F(CudaTwin, EmbeddingSlicesAndPositionsEqualTheEncoderBitForBit) {
  const int B = 4, T = 19, C = 40, Vp = 48, maxT = 24, N = B * T, S = 3, Vs = Vp / S;
  Rng rng(341);
  auto wte = uniform_bf16(rng, static_cast<size_t>(Vp) * C, -1, 1);
  auto wpe = uniform_bf16(rng, static_cast<size_t>(maxT) * C, -1, 1);
  auto dout = uniform_bf16(rng, static_cast<size_t>(N) * C, -1, 1);
  auto dwte0 = uniform_f32(rng, wte.size(), -1, 1), dwpe0 = uniform_f32(rng, wpe.size(), -1, 1);
  std::vector<int> tok(N);
  for (auto& t : tok) t = static_cast<int>(rng.next_u64() % Vp);
  const size_t n = static_cast<size_t>(N) * C;
  for (Backend* be : {gpu.get(), cpu.get()}) {
    DevBuf w = upload_compute(*be, wte), p = upload_compute(*be, wpe), t = upload_ints(*be, tok);
    DevBuf out = poisoned_compute(*be, n), d = upload_compute(*be, dout);
    be->encoder_forward(out.get(), t.i32(), w.get(), p.get(), B, T, C);
    const auto want = download_compute(*be, out.get(), n);
    std::vector<float> sum(n, 0.0f);
    for (int s = 0; s < S; s++) {
      DevBuf rows = upload_compute(*be, std::vector<float>(wte.begin() + static_cast<size_t>(s) * Vs * C,
                                                           wte.begin() + static_cast<size_t>(s + 1) * Vs * C));
      be->embedding_slice_forward(out.get(), t.i32(), rows.get(), s * Vs, Vs, N, C);
      const auto part = download_compute(*be, out.get(), n);
      for (size_t k = 0; k < n; k++) sum[k] += part[k];
    }
    DevBuf x = upload_compute(*be, sum);  // bf16 values: the upload is exact
    be->position_forward(x.get(), p.get(), 0, N, T, C);
    EXPECT_EQ(download_compute(*be, x.get(), n), want) << be->name() << ": slices + positions vs encoder_forward";

    DevBuf ete = upload_f32(*be, dwte0), epe = upload_f32(*be, dwpe0), ste = upload_f32(*be, dwte0),
           spe = upload_f32(*be, dwpe0);
    be->encoder_backward(ete.f32(), epe.f32(), d.get(), t.i32(), B, T, C);
    for (int s = 0; s < S; s++)
      be->embedding_slice_backward(ste.f32() + static_cast<size_t>(s) * Vs * C, d.get(), t.i32(), s * Vs, Vs, N, C);
    be->position_backward(spe.f32(), d.get(), 0, N, T, C);
    EXPECT_EQ(download_f32(*be, ste.get(), wte.size()), download_f32(*be, ete.get(), wte.size()))
        << be->name() << ": the slices' dwte vs encoder_backward";
    EXPECT_EQ(download_f32(*be, spe.get(), wpe.size()), download_f32(*be, epe.get(), wpe.size()))
        << be->name() << ": the rows' dwpe vs encoder_backward";
  }
}

// ---- bias ---------------------------------------------------------------------------------------------------
// x += bias: one fp32 addition of two bf16 numbers, rounded once on the GPU. An unaligned x takes the one-element
// path, which must equal the vector path bit for bit.
void check_bias_forward(Backend& gpu, Backend& cpu, int N, int OC, uint64_t seed) {
  Rng rng(seed);
  auto x = uniform_bf16(rng, static_cast<size_t>(N) * OC, -3, 3), bias = uniform_bf16(rng, OC, -3, 3);
  std::vector<double> ref(x.size()), tc(x.size()), tg(x.size());
  for (size_t k = 0; k < x.size(); k++) {
    ref[k] = static_cast<double>(x[k]) + bias[k % OC];
    tc[k] = kU * std::fabs(ref[k]);
    tg[k] = bf16_out(ref[k], tc[k]);
  }
  auto run = [&](Backend& be, size_t offset) {
    OffsetBuf dx = upload_compute_at(be, x, offset);
    DevBuf db = upload_compute(be, bias);
    be.bias_forward(dx.get(), db.get(), N, OC);
    return download_compute(be, dx.get(), x.size());
  };
  const std::string tag = shape("bias_forward", {{"N", N}, {"OC", OC}});
  const auto g = run(gpu, 0);
  expect_twins(tag, g, run(cpu, 0), ref, tg, tc);
  EXPECT_EQ(run(gpu, 1), g) << tag << ": the one-element path (unaligned x) must equal the vector path";
}

TEST_F(CudaTwin, BiasForward) {
  check_bias_forward(*gpu, *cpu, 13, 40, 351);  // vector path (and, shifted, the one-element path)
  check_bias_forward(*gpu, *cpu, 13, 36, 352);  // OC % 8 != 0: one element at a time
}

// dbias += the column sums of dout: N + 1 terms in any order on either twin, acc(N + 1) * (|start| + sum |dout|).
// It is matmul_backward's reduction: the same dout gives the same dbias bit for bit, on each backend.
void check_bias_backward(Backend& gpu, Backend& cpu, int N, int OC, uint64_t seed) {
  const int C = 8;
  Rng rng(seed);
  auto dout = uniform_bf16(rng, static_cast<size_t>(N) * OC, -1, 1);
  auto start = uniform_f32(rng, OC, -1, 1);
  auto inp = uniform_bf16(rng, static_cast<size_t>(N) * C, -1, 1);
  auto w = uniform_bf16(rng, static_cast<size_t>(OC) * C, -1, 1);
  std::vector<double> ref(start.begin(), start.end()), tol(OC);
  for (int o = 0; o < OC; o++) {
    double a = std::fabs(start[o]);
    for (int i = 0; i < N; i++) {
      const double d = dout[static_cast<size_t>(i) * OC + o];
      ref[o] += d, a += std::fabs(d);
    }
    tol[o] = acc(N + 1) * a;
  }
  const std::string tag = shape("bias_backward", {{"N", N}, {"OC", OC}});
  std::vector<float> got[3];
  Backend* bes[3] = {&gpu, &cpu, &gpu};
  for (int k = 0; k < 3; k++) {
    Backend& be = *bes[k];
    DevBuf d = upload_compute(be, dout), g = upload_f32(be, start), m = upload_f32(be, start);
    be.bias_backward(g.f32(), d.get(), N, OC);
    got[k] = download_f32(be, g.get(), OC);
    DevBuf x = upload_compute(be, inp), wt = upload_compute(be, w), dw(be, static_cast<size_t>(OC) * C * 4);
    be.zero(dw.get(), static_cast<size_t>(OC) * C * 4);
    be.matmul_backward(nullptr, dw.f32(), m.f32(), d.get(), x.get(), wt.get(), N, C, OC);
    EXPECT_EQ(got[k], download_f32(be, m.get(), OC)) << tag << " on " << be.name() << ": matmul_backward's dbias";
  }
  expect_twins(tag, got[0], got[1], ref, tol, tol);
  EXPECT_EQ(got[0], got[2]) << tag << " must repeat bit for bit";
}

TEST_F(CudaTwin, BiasBackwardIsMatmulsDbias) {
  check_bias_backward(*gpu, *cpu, 300, 264, 361);  // vector path, two column tiles, the last partial
  check_bias_backward(*gpu, *cpu, 300, 531, 362);  // OC % 8 != 0: one element at a time
  check_bias_backward(*gpu, *cpu, 1, 17, 363);     // a single row
}

// ---- the vocab-parallel loss ----------------------------------------------------------------------------------
// The (N, Vp) logits of a ClassifierCase split into S column slices of Vs = Vp / S, slice r holding vocabulary
// [r Vs, (r+1) Vs) with valid_r = clamp(V - r Vs, 0, Vs) real columns; each backend runs the three passes slice by
// slice with the group's reductions on the host, in rank order (maxes by max, target logits and sums by a float
// sum), and the backward's loss total on rank 0.
struct GroupRun {
  std::vector<std::vector<float>> maxes, target, sums;  // (S)(N): each rank's own statistics
  std::vector<float> M, T, Ssum;                        // (N): the group's
  std::vector<std::vector<float>> losses;               // (S)(N): each rank's losses (the same on every rank)
  std::vector<float> losses_only;                       // (N): rank 0's pass without dlogits
  std::vector<float> dl;                                // (N, Vp): the slices' dlogits put back together
  double total = 0;                                     // what rank 0's pass added to its loss total
};

int slice_valid(const ClassifierCase& cc, int S, int r) { return std::clamp(cc.V - r * (cc.Vp / S), 0, cc.Vp / S); }

// Columns [lo, lo + Vs) of every row of the (N, Vp) logits: one rank's (N, Vs) block.
std::vector<float> columns(const ClassifierCase& cc, int lo, int Vs) {
  std::vector<float> out(static_cast<size_t>(cc.N) * Vs);
  for (int i = 0; i < cc.N; i++)
    std::copy_n(&cc.logits[static_cast<size_t>(i) * cc.Vp + lo], Vs, &out[static_cast<size_t>(i) * Vs]);
  return out;
}

GroupRun run_group(Backend& be, const ClassifierCase& cc, int S) {
  const int N = cc.N, Vs = cc.Vp / S;
  GroupRun g;
  g.M.assign(N, -INFINITY), g.T.assign(N, 0.0f), g.Ssum.assign(N, 0.0f), g.dl.assign(cc.logits.size(), kNaN);
  DevBuf targets = upload_ints(be, cc.targets);
  for (int r = 0; r < S; r++) {
    DevBuf x = upload_compute(be, columns(cc, r * Vs, Vs)), m = poisoned_f32(be, N), t = poisoned_f32(be, N);
    be.classifier_slice_stats(m.f32(), t.f32(), x.get(), targets.i32(), r * Vs, slice_valid(cc, S, r), N, Vs, cc.V);
    g.maxes.push_back(download_f32(be, m.get(), N));
    g.target.push_back(download_f32(be, t.get(), N));
    for (int i = 0; i < N; i++) g.M[i] = std::max(g.M[i], g.maxes[r][i]), g.T[i] += g.target[r][i];
  }
  DevBuf M = upload_f32(be, g.M), T = upload_f32(be, g.T);
  for (int r = 0; r < S; r++) {
    DevBuf x = upload_compute(be, columns(cc, r * Vs, Vs)), s = poisoned_f32(be, N);
    be.classifier_slice_sumexp(s.f32(), x.get(), M.f32(), slice_valid(cc, S, r), N, Vs);
    g.sums.push_back(download_f32(be, s.get(), N));
    for (int i = 0; i < N; i++) g.Ssum[i] += g.sums[r][i];
  }
  DevBuf Ssum = upload_f32(be, g.Ssum);
  const double start = 0.75;  // rank 0's running total before this micro-batch
  for (int r = 0; r < S; r++) {
    DevBuf x = upload_compute(be, columns(cc, r * Vs, Vs)), l = poisoned_f32(be, N), total(be, sizeof(double));
    be.copy_h2d(total.get(), &start, sizeof(double));
    be.classifier_slice_backward(x.get(), l.f32(), r == 0 ? static_cast<double*>(total.get()) : nullptr, M.f32(),
                                 Ssum.f32(), T.f32(), targets.i32(), r * Vs, slice_valid(cc, S, r), cc.dloss, N, Vs);
    g.losses.push_back(download_f32(be, l.get(), N));
    const auto dl = download_compute(be, x.get(), static_cast<size_t>(N) * Vs);
    for (int i = 0; i < N; i++)
      std::copy_n(&dl[static_cast<size_t>(i) * Vs], Vs, &g.dl[static_cast<size_t>(i) * cc.Vp + r * Vs]);
    if (r == 0) {
      be.copy_d2h(&g.total, total.get(), sizeof(double));
      be.synchronize();
      g.total -= start;
      DevBuf only = poisoned_f32(be, N);
      be.classifier_slice_backward(nullptr, only.f32(), nullptr, M.f32(), Ssum.f32(), T.f32(), targets.i32(), 0,
                                   slice_valid(cc, S, 0), cc.dloss, N, Vs);
      g.losses_only = download_f32(be, only.get(), N);
    }
  }
  return g;
}

// Each pass's own result against the reference, then the group's against the whole classifier's reference:
//  - stats: a max of bf16 values and a copied logit, exact on both (-inf for a slice with no valid column).
//  - sumexp at the group max M (exact, so both twins get the same M): the slice's terms carry 4u of the exponential
//    and u |x - M| (cpu) or 3u |x - M| (GPU) of its argument, and the slice's fp32 sum acc(valid) of their sum.
//  - the group: M and the target logit exact, the exp-sum the same V terms added in another order, so the losses,
//    dlogits and loss total are within ClassifierCase's bounds for the whole classifier (any order: acc(V)).
void check_group(Backend& gpu, Backend& cpu, const ClassifierCase& cc, int S) {
  const int N = cc.N, Vs = cc.Vp / S;
  const std::string tag = shape("classifier_slice", {{"V", cc.V}, {"Vp", cc.Vp}, {"S", S}});
  const GroupRun g = run_group(gpu, cc, S), c = run_group(cpu, cc, S);
  for (int r = 0; r < S; r++) {
    const int lo = r * Vs, valid = slice_valid(cc, S, r);
    std::vector<double> rmax(N, -INFINITY), rt(N, 0.0), rs(N, 0.0), ts_c(N, 0.0), ts_g(N, 0.0), zero(N, 0.0);
    for (int i = 0; i < N; i++) {
      const float* x = &cc.logits[static_cast<size_t>(i) * cc.Vp + lo];
      double ec = 0, eg = 0;
      for (int j = 0; j < valid; j++) {
        rmax[i] = std::max(rmax[i], static_cast<double>(x[j]));
        const double d = static_cast<double>(x[j]) - g.M[i], e = std::exp(d);
        rs[i] += e, ec += e * (4 * kU + kU * std::fabs(d)), eg += e * (4 * kU + 3 * kU * std::fabs(d));
      }
      if (cc.targets[i] >= lo && cc.targets[i] < lo + valid) rt[i] = x[cc.targets[i] - lo];
      ts_c[i] = ec + acc(valid) * rs[i], ts_g[i] = eg + acc(valid) * rs[i];
    }
    const std::string rank = tag + " rank " + std::to_string(r) + " valid=" + std::to_string(valid);
    EXPECT_EQ(g.maxes[r], c.maxes[r]) << rank;  // exact on both; -inf == -inf
    for (int i = 0; i < N; i++) EXPECT_EQ(static_cast<double>(g.maxes[r][i]), rmax[i]) << rank << " row " << i;
    expect_twins(rank + " target", g.target[r], c.target[r], rt, zero, zero);
    expect_twins(rank + " sums", g.sums[r], c.sums[r], rs, ts_g, ts_c);
    EXPECT_EQ(g.losses[r], g.losses[0]) << rank << ": every rank's losses are the same (cuda)";
    EXPECT_EQ(c.losses[r], c.losses[0]) << rank << ": every rank's losses are the same (cpu)";
  }
  expect_twins(tag + " losses", g.losses[0], c.losses[0], cc.loss, cc.tloss_g, cc.tloss_c);
  expect_twins(tag + " dlogits", g.dl, c.dl, cc.dl, cc.tdl_g, cc.tdl_c);
  EXPECT_EQ(g.losses_only, g.losses[0]) << tag << ": the losses without dlogits (cuda)";
  EXPECT_EQ(c.losses_only, c.losses[0]) << tag << ": the losses without dlogits (cpu)";
  double ref = 0, tc = 0, tg = 0;
  for (int i = 0; i < N; i++) ref += cc.loss[i], tc += cc.tloss_c[i], tg += cc.tloss_g[i];
  // the float conversion of the added part costs u of it (as in the whole classifier's test)
  expect_twins(tag + " loss total", {static_cast<float>(g.total)}, {static_cast<float>(c.total)}, {ref},
               {tg + kU * ref}, {tc + kU * ref});
}

// Vs % 8 == 0 takes the register-cached vector path, Vs = 143 the one-element path; V = 500 of Vp = 1024 in four
// slices leaves the last two without a valid column (valid = 0); GPT-2's vocabulary in two slices of 25152; and a
// slice longer than the register cache (60032 > 7 x 1024 x 8 columns).
TEST_F(CudaTwin, ClassifierSliceGroupEqualsTheWholeClassifier) {
  check_group(*gpu, *cpu, ClassifierCase(371, 13, 997, 1024), 2);
  check_group(*gpu, *cpu, ClassifierCase(372, 13, 997, 1001), 7);
  check_group(*gpu, *cpu, ClassifierCase(373, 13, 500, 1024), 4);
  check_group(*gpu, *cpu, ClassifierCase(374, 5, 50257, 50304), 2);
  check_group(*gpu, *cpu, ClassifierCase(375, 3, 60000, 60032), 1);
}

// The GPU cannot throw from a kernel: a target outside [0, V) gives a NaN target logit, hence a NaN loss, as the
// whole classifier gives (the cpu throws; tests/ops/test_classifier_slice.cpp).
TEST_F(CudaTwin, ClassifierSliceStatsMarkATargetOutsideTheVocab) {
  const int N = 3, Vs = 16, V = 40;
  Rng rng(381);
  auto logits = uniform_bf16(rng, static_cast<size_t>(N) * Vs, -1, 1);
  const std::vector<int> targets{V, -1, 17};  // the last one in the slice [16, 32)
  DevBuf x = upload_compute(*gpu, logits), t = upload_ints(*gpu, targets), m = poisoned_f32(*gpu, N),
         tl = poisoned_f32(*gpu, N);
  gpu->classifier_slice_stats(m.f32(), tl.f32(), x.get(), t.i32(), 16, Vs, N, Vs, V);
  const auto got = download_f32(*gpu, tl.get(), N);
  EXPECT_TRUE(std::isnan(got[0]) && std::isnan(got[1])) << got[0] << " " << got[1];
  EXPECT_EQ(got[2], logits[2 * Vs + 1]);
}

}  // namespace
}  // namespace gpt::test
