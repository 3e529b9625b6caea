// Causal self-attention against a naive double loop (outputs and saved probabilities), the backward
// against finite differences (all of qkv for a small case; sampled entries for a case that spans several
// 64-row blocks), causality: changing a future token's k and v leaves earlier outputs bit-identical, and
// the cached variant sampling uses against the same loop.
#include "tests/ops/op_test_util.h"

namespace gpt::test {
namespace {

struct AttnShape {
  int B, T, C, NH;
  size_t qkv() const { return static_cast<size_t>(B) * T * 3 * C; }
  size_t out() const { return static_cast<size_t>(B) * T * C; }
  size_t att() const { return static_cast<size_t>(B) * NH * T * T; }
};

// out (B,T,C); probs (B,NH,T,T) if given, zero above the diagonal.
std::vector<double> attention_ref(const AttnShape& s, const std::vector<double>& qkv,
                                  std::vector<double>* probs = nullptr) {
  int hs = s.C / s.NH, C3 = 3 * s.C;
  double scale = 1.0 / std::sqrt(static_cast<double>(hs));
  std::vector<double> out(s.out(), 0.0), p(s.T);
  if (probs) probs->assign(s.att(), 0.0);
  for (int b = 0; b < s.B; b++)
    for (int h = 0; h < s.NH; h++)
      for (int t = 0; t < s.T; t++) {
        const double* q = &qkv[(b * s.T + t) * C3 + h * hs];
        double mx = -1e300, sum = 0;
        for (int j = 0; j <= t; j++) {
          const double* k = &qkv[(b * s.T + j) * C3 + s.C + h * hs];
          double d = 0;
          for (int e = 0; e < hs; e++) d += q[e] * k[e];
          p[j] = d * scale;
          mx = std::max(mx, p[j]);
        }
        for (int j = 0; j <= t; j++) sum += (p[j] = std::exp(p[j] - mx));
        for (int j = 0; j <= t; j++) {
          p[j] /= sum;
          const double* v = &qkv[(b * s.T + j) * C3 + 2 * s.C + h * hs];
          for (int e = 0; e < hs; e++) out[(b * s.T + t) * s.C + h * hs + e] += p[j] * v[e];
          if (probs) (*probs)[((b * s.NH + h) * s.T + t) * s.T + j] = p[j];
        }
      }
  return out;
}

void check_forward(const AttnShape& s, uint64_t seed) {
  auto be = cpu_backend();
  ASSERT_EQ(be->attention_state_bytes(s.B, s.T, s.NH), s.att() * sizeof(float));
  auto qkv = randn(s.qkv(), seed);
  std::vector<float> out(s.out()), att(s.att(), 9.0f);  // garbage in att: masked entries must become 0
  be->attention_forward(out.data(), att.data(), qkv.data(), s.B, s.T, s.C, s.NH);
  std::vector<double> probs;
  auto ref = attention_ref(s, to_double(qkv), &probs);
  // Scores are float dot products of hs terms (~1e-6 absolute), exp has ~2 ulp, and outputs average
  // O(1) values: errors ~1e-6 absolute; masked probabilities are compared exactly (both 0).
  EXPECT_TRUE(all_close(out, ref, 1e-5, 1e-5)) << "T=" << s.T;
  EXPECT_TRUE(all_close(att, probs, 1e-6, 1e-5));
  for (int bh = 0; bh < s.B * s.NH; bh++)
    for (int t = 0; t < s.T; t++)
      for (int j = t + 1; j < s.T; j++) ASSERT_EQ(att[(static_cast<size_t>(bh) * s.T + t) * s.T + j], 0.0f);
}

TEST(Attention, ForwardMatchesNaiveLoop) {
  check_forward({2, 7, 12, 3}, 1);
  check_forward({1, 1, 8, 2}, 2);      // a single token
  check_forward({2, 130, 32, 2}, 3);   // three 64-row blocks, the last one partial
}

// Backward vs finite differences of sum(dout * out) over `samples` entries of qkv (0 = all).
void check_backward(const AttnShape& s, size_t samples, uint64_t seed) {
  auto be = cpu_backend();
  auto qkv = randn(s.qkv(), seed), dout = randn(s.out(), seed + 1);
  std::vector<float> out(s.out()), att(s.att()), dqkv(s.qkv(), 77.0f);  // dqkv garbage: overwritten
  be->attention_forward(out.data(), att.data(), qkv.data(), s.B, s.T, s.C, s.NH);
  be->attention_backward(dqkv.data(), dout.data(), qkv.data(), out.data(), att.data(), s.B, s.T, s.C, s.NH);

  auto xd = to_double(qkv), dd = to_double(dout);
  auto L = [&]() { return dot(dd, attention_ref(s, xd)); };
  Rng pick(seed);
  size_t n = samples ? samples : xd.size();
  for (size_t k = 0; k < n; k++) {
    size_t i = samples ? pick.next_u64() % xd.size() : k;
    double expect = central_diff(L, xd, i);
    // Float sums over up to T keys of O(1) products plus the softmax Jacobian: ~1e-6..1e-5 absolute.
    ASSERT_NEAR(dqkv[i], expect, 3e-5 + 1e-4 * std::fabs(expect)) << "dqkv[" << i << "] T=" << s.T;
  }
}

TEST(Attention, BackwardMatchesFiniteDifferences) {
  check_backward({2, 7, 12, 3}, 0, 10);
  check_backward({1, 1, 4, 1}, 0, 20);  // one token: dq and dk are exactly zero, dv = dout
  check_backward({1, 130, 16, 2}, 150, 30);
}

TEST(Attention, FutureTokensDoNotChangeThePast) {
  AttnShape s{2, 100, 16, 2};
  auto be = cpu_backend();
  auto qkv = randn(s.qkv(), 40);
  std::vector<float> out1(s.out()), out2(s.out()), att(s.att());
  be->attention_forward(out1.data(), att.data(), qkv.data(), s.B, s.T, s.C, s.NH);
  int tf = 70;  // in the second row block: earlier rows of the same block compute scores against it
  for (int b = 0; b < s.B; b++)
    for (int c = s.C; c < 3 * s.C; c++) qkv[(b * s.T + tf) * 3 * s.C + c] += 3.0f;  // k and v of token tf
  be->attention_forward(out2.data(), att.data(), qkv.data(), s.B, s.T, s.C, s.NH);
  for (int b = 0; b < s.B; b++) {
    for (int t = 0; t < tf; t++)
      for (int c = 0; c < s.C; c++) ASSERT_EQ(out1[(b * s.T + t) * s.C + c], out2[(b * s.T + t) * s.C + c]);
    // ...while the token itself and later ones do see the change.
    EXPECT_NE(out1[(b * s.T + tf) * s.C], out2[(b * s.T + tf) * s.C]);
  }
}

// The cached op (sampling) over a sequence fed in chunks: each chunk's outputs equal the rows of the naive
// loop over the whole sequence (the same bound as the forward above: the same float math, one row block at
// a time), and the caches hold exactly the keys and values of every position fed so far.
void check_cached(const AttnShape& s, int Tmax, const std::vector<int>& chunks, uint64_t seed) {
  auto be = cpu_backend();
  const int C = s.C, C3 = 3 * C, hs = C / s.NH;
  auto qkv = randn(s.qkv(), seed);
  const std::vector<double> ref = attention_ref(s, to_double(qkv));
  const size_t cache = static_cast<size_t>(s.B) * s.NH * Tmax * hs;
  std::vector<float> kc(cache, 5.0f), vc(cache, 5.0f);  // garbage beyond what is fed: never read
  int past = 0;
  for (int n : chunks) {
    std::vector<float> in(static_cast<size_t>(s.B) * n * C3), out(static_cast<size_t>(s.B) * n * C, 9.0f);
    std::vector<double> want(out.size());
    for (int b = 0; b < s.B; b++)
      for (int t = 0; t < n; t++) {
        const size_t row = static_cast<size_t>(b) * s.T + past + t, at = static_cast<size_t>(b) * n + t;
        std::copy_n(&qkv[row * C3], C3, &in[at * C3]);
        std::copy_n(&ref[row * C], C, &want[at * C]);
      }
    be->attention_cached_forward(out.data(), kc.data(), vc.data(), in.data(), s.B, n, past, Tmax, C, s.NH);
    EXPECT_TRUE(all_close(out, want, 1e-5, 1e-5)) << "chunk of " << n << " after " << past;
    past += n;
  }
  ASSERT_EQ(past, s.T);
  for (int b = 0; b < s.B; b++)
    for (int h = 0; h < s.NH; h++)
      for (int t = 0; t < s.T; t++)
        for (int d = 0; d < hs; d++) {
          const size_t at = ((static_cast<size_t>(b) * s.NH + h) * Tmax + t) * hs + d;
          const size_t row = (static_cast<size_t>(b) * s.T + t) * C3 + h * hs + d;
          ASSERT_EQ(kc[at], qkv[row + C]);
          ASSERT_EQ(vc[at], qkv[row + 2 * C]);
        }
}

TEST(Attention, CachedMatchesNaiveLoop) {
  check_cached({2, 7, 12, 3}, 7, {7}, 50);                    // the whole sequence at once
  check_cached({2, 9, 12, 3}, 12, {3, 1, 1, 4}, 51);          // a prompt, then tokens; spare cache
  check_cached({1, 150, 32, 2}, 150, {70, 1, 64, 15}, 52);    // chunks over several 64-row blocks
}

TEST(Attention, CachedRefusesPositionsPastTheCache) {
  auto be = cpu_backend();
  std::vector<float> qkv(2 * 3 * 8), out(2 * 8), kc(4 * 8), vc(4 * 8);
  EXPECT_THROW(be->attention_cached_forward(out.data(), kc.data(), vc.data(), qkv.data(), 1, 2, 3, 4, 8, 2), Error);
  EXPECT_THROW(be->attention_cached_forward(out.data(), kc.data(), vc.data(), qkv.data(), 1, 1, -1, 4, 8, 2), Error);
  EXPECT_NO_THROW(be->attention_cached_forward(out.data(), kc.data(), vc.data(), qkv.data(), 1, 2, 2, 4, 8, 2));
}

}  // namespace
}  // namespace gpt::test
