// Encoder (token + position embedding) against a naive double loop; backward against finite differences,
// with repeated tokens (so several rows land on one wte row) and pre-filled gradients (the += contract).
#include "tests/ops/op_test_util.h"

namespace gpt::test {
namespace {

struct EncoderCase {
  int B = 2, T = 5, C = 13, Vp = 11, maxT = 7;
  std::vector<int> tokens{3, 3, 0, 10, 3, 7, 0, 0, 9, 3};  // (B,T) repeats on purpose
};

// out (B,T,C) = wte[tokens] + wpe[t], in double.
std::vector<double> encoder_ref(const EncoderCase& k, const std::vector<double>& wte, const std::vector<double>& wpe) {
  std::vector<double> out(static_cast<size_t>(k.B) * k.T * k.C);
  for (int b = 0; b < k.B; b++)
    for (int t = 0; t < k.T; t++)
      for (int c = 0; c < k.C; c++)
        out[(b * k.T + t) * k.C + c] = wte[k.tokens[b * k.T + t] * k.C + c] + wpe[t * k.C + c];
  return out;
}

TEST(Encoder, ForwardMatchesNaiveLoop) {
  EncoderCase k;
  auto be = cpu_backend();
  auto wte = randn(k.Vp * k.C, 1), wpe = randn(k.maxT * k.C, 2);
  std::vector<float> out(k.B * k.T * k.C);
  be->encoder_forward(out.data(), k.tokens.data(), wte.data(), wpe.data(), k.B, k.T, k.C);
  // One float addition of two floats: correctly rounded, so within 1 ulp (6e-8 relative).
  EXPECT_TRUE(all_close(out, encoder_ref(k, to_double(wte), to_double(wpe)), 0.0, 1.2e-7));
}

TEST(Encoder, BackwardMatchesFiniteDifferencesAndAccumulates) {
  EncoderCase k;
  auto be = cpu_backend();
  auto wte = randn(k.Vp * k.C, 3), wpe = randn(k.maxT * k.C, 4), dout = randn(k.B * k.T * k.C, 5);
  auto wte_d = to_double(wte), wpe_d = to_double(wpe), dout_d = to_double(dout);
  auto L = [&]() { return dot(dout_d, encoder_ref(k, wte_d, wpe_d)); };
  auto gwte = fd_gradient(L, wte_d), gwpe = fd_gradient(L, wpe_d);

  auto dwte = randn(k.Vp * k.C, 6), dwpe = randn(k.maxT * k.C, 7);  // pre-filled: backward must add
  auto dwte0 = to_double(dwte), dwpe0 = to_double(dwpe);
  for (size_t i = 0; i < gwte.size(); i++) gwte[i] += dwte0[i];
  for (size_t i = 0; i < gwpe.size(); i++) gwpe[i] += dwpe0[i];
  be->encoder_backward(dwte.data(), dwpe.data(), dout.data(), k.tokens.data(), k.B, k.T, k.C);
  // Each entry is a float sum of at most 5 terms plus the prefill: a few ulp of values O(3); 1e-6 absolute
  // also covers the finite-difference error.
  EXPECT_TRUE(all_close(dwte, gwte, 1e-6, 1e-6));
  EXPECT_TRUE(all_close(dwpe, gwpe, 1e-6, 1e-6));
  // Rows of wte no token uses (e.g. 1, 2) must be left exactly as they were.
  for (int c = 0; c < k.C; c++) EXPECT_EQ(dwte[1 * k.C + c], static_cast<float>(dwte0[1 * k.C + c]));
}

TEST(Encoder, WideChannelsUseEveryBlock) {
  // C = 200 spans several 64-channel blocks with a partial last one; compare against the naive sums.
  int B = 3, T = 4, C = 200, Vp = 5;
  std::vector<int> tokens{1, 4, 1, 0, 2, 2, 2, 1, 4, 0, 0, 3};
  auto be = cpu_backend();
  auto dout = randn(B * T * C, 8);
  std::vector<float> dwte(Vp * C, 0.0f), dwpe(T * C, 0.0f);
  be->encoder_backward(dwte.data(), dwpe.data(), dout.data(), tokens.data(), B, T, C);
  std::vector<double> ewte(Vp * C, 0.0), ewpe(T * C, 0.0);
  for (int bt = 0; bt < B * T; bt++)
    for (int c = 0; c < C; c++) {
      ewte[tokens[bt] * C + c] += dout[bt * C + c];
      ewpe[(bt % T) * C + c] += dout[bt * C + c];
    }
  EXPECT_TRUE(all_close(dwte, ewte, 1e-6, 1e-6));
  EXPECT_TRUE(all_close(dwpe, ewpe, 1e-6, 1e-6));
}

TEST(Encoder, NegativeTokenIsAnError) {
  auto be = cpu_backend();
  std::vector<int> tokens{0, -1};
  std::vector<float> wte(4 * 3), wpe(2 * 3), out(2 * 3);
  EXPECT_THROW(be->encoder_forward(out.data(), tokens.data(), wte.data(), wpe.data(), 1, 2, 3), gpt::Error);
}

}  // namespace
}  // namespace gpt::test
