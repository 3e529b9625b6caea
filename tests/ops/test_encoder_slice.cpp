// Why: the tensor-parallel model embeds tokens with one slice of the vocabulary per rank and adds the positions of
// a range of grid rows (embedding_slice_*, position_*). These check the cpu ops against straightforward double
// loops (zero rows for tokens outside the slice, row ranges that start at first != 0 and wrap past T, the +=
// contract of the gradients), and the identities the model rests on: the slices' lookups summed over the group
// and then the positions give encoder_forward's output bit for bit, and the slices' and the rows' gradients give
// encoder_backward's bit for bit.
//
// Bounds: a lookup is a copy (exact); position_forward is one fp32 addition, correctly rounded, so within u |ref|
// (u = 2^-24) of the double sum of the two floats, which double holds exactly; a gradient element that adds k
// dout rows to its starting value is a chain of k fp32 additions, within gamma_k * (sum of |terms|) of the exact
// sum (op_test_util.h).
#include <limits>

#include "tests/ops/op_test_util.h"

namespace gpt::test {
namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

// out (N,C) = wte[tokens[i]] when lo <= tokens[i] < lo + rows, else 0 (wte: the whole table).
std::vector<double> lookup_ref(const std::vector<int>& tokens, const std::vector<float>& wte, int lo, int rows, int C) {
  std::vector<double> out(tokens.size() * C, 0.0);
  for (size_t i = 0; i < tokens.size(); i++)
    if (tokens[i] >= lo && tokens[i] < lo + rows)
      for (int c = 0; c < C; c++) out[i * C + c] = wte[static_cast<size_t>(tokens[i]) * C + c];
  return out;
}

// A gradient table (rows, C) that starts at `start` and gets rows of dout added: the exact double sums, and the
// bound gamma_k * sum|terms| per element, k the rows added into it (0: the element must be left exactly as it was).
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
    for (size_t k = 0; k < b.size(); k++) b[k] = gamma_n(added[k / C]) * abs_sum[k];
    return b;
  }
};

TEST(EmbeddingSlice, ForwardCopiesTheSlicesRowsAndZerosTheRest) {
  const int C = 7, Vp = 20, lo = 8, rows = 6;  // the slice holds ids 8..13
  std::vector<int> tokens{8, 13, 0, 7, 14, 19, 10, 10, 3, 8, 12, 9};  // inside, just outside on each side, repeats
  const int N = static_cast<int>(tokens.size());
  auto be = cpu_backend();
  auto wte = randn(static_cast<size_t>(Vp) * C, 1);
  for (const int r : {0, rows}) {  // an empty slice too: every row 0
    std::vector<float> out(static_cast<size_t>(N) * C, kNaN);  // an element the op forgets stays NaN and fails
    be->embedding_slice_forward(out.data(), tokens.data(), wte.data() + static_cast<size_t>(lo) * C, lo, r, N, C);
    EXPECT_TRUE(all_close(out, lookup_ref(tokens, wte, lo, r, C), 0.0, 0.0)) << "rows=" << r;  // a copy: exact
  }
}

TEST(EmbeddingSlice, BackwardAddsTheRowsOfItsTokensOnly) {
  // C = 150: three channel blocks of the cpu kernel, the last partial.
  const int N = 40, C = 150, Vp = 12, lo = 4, rows = 5;
  Rng rng(2);
  std::vector<int> tokens(N);
  for (auto& t : tokens) t = static_cast<int>(rng.next_u64() % Vp);  // many repeats, many outside the slice
  tokens[0] = lo, tokens[1] = lo + rows - 1, tokens[2] = lo - 1, tokens[3] = lo + rows;  // the edges
  auto be = cpu_backend();
  auto dout = randn(static_cast<size_t>(N) * C, 3);
  auto dwte = randn(static_cast<size_t>(rows) * C, 4);  // pre-filled: backward must add
  GradRef ref(dwte, C);
  for (int i = 0; i < N; i++)
    if (tokens[i] >= lo && tokens[i] < lo + rows) ref.add(tokens[i] - lo, &dout[static_cast<size_t>(i) * C]);
  be->embedding_slice_backward(dwte.data(), dout.data(), tokens.data(), lo, rows, N, C);
  EXPECT_TRUE(all_within(dwte, ref.sum, ref.bound()));
}

TEST(EmbeddingSlice, NegativeTokenIsAnError) {
  auto be = cpu_backend();
  std::vector<int> tokens{0, -1};
  std::vector<float> wte(4 * 3), out(2 * 3), dwte(4 * 3);
  EXPECT_THROW(be->embedding_slice_forward(out.data(), tokens.data(), wte.data(), 2, 2, 2, 3), gpt::Error);
  EXPECT_THROW(be->embedding_slice_backward(dwte.data(), out.data(), tokens.data(), 2, 2, 2, 3), gpt::Error);
}

// x (n,C) += wpe[(first + i) % T]: ranges that start inside the period, start past it, wrap several times, or
// stay short of it. The rows of wpe from T on are NaN: reading one (a wrong period) fails the check.
struct RangeCase {
  int first, n, T;
};
const RangeCase kRanges[] = {{3, 9, 5}, {12, 4, 5}, {0, 2, 5}, {3, 23, 5}, {0, 14, 7}};

TEST(PositionEmbedding, ForwardAddsTheRowsOfARangeThatWrapsPastT) {
  const int C = 13, maxT = 8;
  auto be = cpu_backend();
  uint64_t seed = 10;
  for (const RangeCase& r : kRanges) {
    auto x = randn(static_cast<size_t>(r.n) * C, seed++), wpe = randn(static_cast<size_t>(maxT) * C, seed++);
    std::fill(wpe.begin() + static_cast<size_t>(r.T) * C, wpe.end(), kNaN);
    std::vector<double> ref(x.size()), bound(x.size());
    for (int i = 0; i < r.n; i++)
      for (int c = 0; c < C; c++) {
        const size_t k = static_cast<size_t>(i) * C + c;
        ref[k] = static_cast<double>(x[k]) + wpe[static_cast<size_t>((r.first + i) % r.T) * C + c];
        bound[k] = kUnitRoundoff * std::fabs(ref[k]);  // one correctly rounded addition
      }
    be->position_forward(x.data(), wpe.data(), r.first, r.n, r.T, C);
    EXPECT_TRUE(all_within(x, ref, bound)) << "first=" << r.first << " n=" << r.n << " T=" << r.T;
  }
}

TEST(PositionEmbedding, BackwardSumsTheRowsOfEachPositionAndAccumulates) {
  const int C = 150, maxT = 8;  // three channel blocks, the last partial
  auto be = cpu_backend();
  uint64_t seed = 30;
  for (const RangeCase& r : kRanges) {
    auto dout = randn(static_cast<size_t>(r.n) * C, seed++);
    auto dwpe = randn(static_cast<size_t>(maxT) * C, seed++);  // pre-filled; rows no row lands on stay as they are
    GradRef ref(dwpe, C);
    for (int i = 0; i < r.n; i++) ref.add((r.first + i) % r.T, &dout[static_cast<size_t>(i) * C]);
    be->position_backward(dwpe.data(), dout.data(), r.first, r.n, r.T, C);
    EXPECT_TRUE(all_within(dwpe, ref.sum, ref.bound())) << "first=" << r.first << " n=" << r.n << " T=" << r.T;
  }
}

TEST(PositionEmbedding, BadRangeIsAnError) {
  auto be = cpu_backend();
  std::vector<float> x(4 * 3), wpe(4 * 3);
  EXPECT_THROW(be->position_forward(x.data(), wpe.data(), -1, 2, 4, 3), gpt::Error);
  EXPECT_THROW(be->position_forward(x.data(), wpe.data(), 0, 2, 0, 3), gpt::Error);
  EXPECT_THROW(be->position_backward(wpe.data(), x.data(), -2, 2, 4, 3), gpt::Error);
}

// The vocabulary split into S slices of Vp / S rows, as a TP group holds it.
struct GridCase {
  int B = 3, T = 7, C = 37, Vp = 24, maxT = 9;
  std::vector<int> tokens;
  explicit GridCase(uint64_t seed) : tokens(static_cast<size_t>(B) * T) {
    Rng rng(seed);
    for (auto& t : tokens) t = static_cast<int>(rng.next_u64() % Vp);
  }
  int N() const { return B * T; }
};

TEST(EmbeddingSlice, SlicesSummedThenPositionsEqualTheEncoderBitForBit) {
  GridCase g(40);
  auto be = cpu_backend();
  auto wte = randn(static_cast<size_t>(g.Vp) * g.C, 41), wpe = randn(static_cast<size_t>(g.maxT) * g.C, 42);
  const size_t n = static_cast<size_t>(g.N()) * g.C;
  std::vector<float> want(n);
  be->encoder_forward(want.data(), g.tokens.data(), wte.data(), wpe.data(), g.B, g.T, g.C);
  for (const int S : {1, 2, 3}) {
    const int Vs = g.Vp / S;
    std::vector<float> x(n, 0.0f), part(n);
    for (int s = 0; s < S; s++) {  // the group's sum, in rank order: one nonzero term per element
      be->embedding_slice_forward(part.data(), g.tokens.data(), wte.data() + static_cast<size_t>(s) * Vs * g.C, s * Vs,
                                  Vs, g.N(), g.C);
      for (size_t k = 0; k < n; k++) x[k] += part[k];
    }
    be->position_forward(x.data(), wpe.data(), 0, g.N(), g.T, g.C);
    EXPECT_EQ(x, want) << "S=" << S;
  }
}

TEST(EmbeddingSlice, SliceAndRowGradientsEqualTheEncodersBitForBit) {
  GridCase g(50);
  g.C = 150;  // three channel blocks
  auto be = cpu_backend();
  auto dout = randn(static_cast<size_t>(g.N()) * g.C, 51);
  const auto dwte0 = randn(static_cast<size_t>(g.Vp) * g.C, 52), dwpe0 = randn(static_cast<size_t>(g.maxT) * g.C, 53);
  auto want_te = dwte0, want_pe = dwpe0;
  be->encoder_backward(want_te.data(), want_pe.data(), dout.data(), g.tokens.data(), g.B, g.T, g.C);
  for (const int S : {1, 2, 3}) {
    const int Vs = g.Vp / S;
    auto te = dwte0, pe = dwpe0;
    for (int s = 0; s < S; s++)  // each rank's rows of the table
      be->embedding_slice_backward(te.data() + static_cast<size_t>(s) * Vs * g.C, dout.data(), g.tokens.data(), s * Vs,
                                   Vs, g.N(), g.C);
    be->position_backward(pe.data(), dout.data(), 0, g.N(), g.T, g.C);
    EXPECT_EQ(te, want_te) << "S=" << S;
    EXPECT_EQ(pe, want_pe) << "S=" << S;
  }
}

}  // namespace
}  // namespace gpt::test
