// Activation memory from the ledger against closed forms (cpu backend, fp32, N = B*T rows):
//   one block's activations A_blk = 4*(15*N*C + 4*N + B*NH*T*T)   (ln1 qkv atty res2 ln2 fch fch_gelu,
//                                                                 layernorm stats, softmax probabilities)
//   residual stream          4*(L+1)*N*C (always kept)
//   head and loss            4*(N*C + 2*N + N*Vp + 3*N) + 8  (lnf + stats, logits, losses, inputs, targets,
//                                                          the fp64 loss total)
//   backward scratch         4*11*N*C
//   recompute none:      stream + L*A_blk + head + scratch
//   recompute full:      stream + 1*A_blk + head + scratch      (~ L*B*T*C*4 + one block)
//   recompute selective: per layer the kept qkv, res2, fch and stats, plus one shared set of the rest
#include <gtest/gtest.h>

#include "tests/common/harness.h"
#include "tests/common/tiny_config.h"

namespace gpt::test {
namespace {

int64_t activation_bytes(const char* mode, const GPTConfig& c, int B, int T) {
  Harness h(c, RecomputePolicy::parse(mode));
  std::vector<int> in(B * T, 1), tg(B * T, 2);
  h.loss_and_grads(in, tg, B, T);
  return h.be->ledger().peak(MemDomain::device, MemCat::activation);
}

TEST(ActivationMemory, MatchesClosedFormsForEachRecomputeMode) {
  GPTConfig c = tiny_config(4, 2, 32, 16, 50);
  const int B = 3, T = 16;
  const int64_t N = B * T, C = c.channels, L = c.num_layers, NH = c.num_heads, Vp = c.padded_vocab_size;
  const int64_t state = B * NH * T * T;
  const int64_t block = 4 * (15 * N * C + 4 * N + state);
  const int64_t stream = 4 * (L + 1) * N * C;
  const int64_t head = 4 * (N * C + 2 * N + N * Vp + 3 * N) + 8;
  const int64_t scratch = 4 * 11 * N * C;
  EXPECT_EQ(activation_bytes("none", c, B, T), stream + L * block + head + scratch);
  EXPECT_EQ(activation_bytes("full", c, B, T), stream + block + head + scratch);
  // every:2 recomputes layers 0 and 2: two layers keep everything, one shared set serves the others
  EXPECT_EQ(activation_bytes("every:2", c, B, T), stream + 3 * block + head + scratch);
  const int64_t kept = 4 * (3 * N * C + N * C + 4 * N * C + 4 * N);            // qkv, res2, fch, stats
  const int64_t shared = 4 * (N * C + N * C + state + N * C + 4 * N * C);     // ln1, atty, probs, ln2, gelu
  EXPECT_EQ(activation_bytes("selective", c, B, T), stream + L * kept + shared + head + scratch);
}

}  // namespace
}  // namespace gpt::test
