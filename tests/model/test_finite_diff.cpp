// The whole model's gradients against central finite differences of its own loss, on a d2-shaped model
// (2 layers, 2 heads) with a small vocabulary. The loss is computed in fp32, so the difference quotient
// carries ~ eps32*|loss|/h of rounding noise (~3e-5 for h=1e-2, loss ~5): coordinates are compared with a
// relative tolerance of 2% plus an absolute 2e-4, far below the size of a wrong gradient.
#include <gtest/gtest.h>

#include "tests/common/harness.h"
#include "src/core/rng.h"
#include "tests/common/tiny_config.h"

namespace gpt::test {
namespace {

TEST(FiniteDiff, WholeModelGradients) {
  GPTConfig cfg = tiny_config(2, 2, 16, 8, 60);
  Harness h(cfg);
  h.init(7);
  // larger weights than GPT-2's init so every path (attention, gelu, layernorm) carries gradient
  const Layout& layout = h.model->layout();
  Rng rng(99);
  std::vector<std::vector<float>> w;
  for (int u = 0; u < layout.num_units(); u++) {
    w.push_back(h.params(u));
    for (auto& x : w.back()) x += (float)(0.2 * rng.normal());
  }
  h.set_weights(w);
  const int B = 2, T = 6;
  std::vector<int> in(B * T), tg(B * T);
  for (int i = 0; i < B * T; i++) in[i] = (int)(rng.next_u64() % 60), tg[i] = (int)(rng.next_u64() % 60);
  h.loss_and_grads(in, tg, B, T);
  int checked = 0;
  for (int u = 0; u < layout.num_units(); u++) {
    std::vector<float> g = h.grads(u);
    for (const TensorSpec& t : layout.unit(u).tensors) {
      for (int k = 0; k < 4; k++) {  // 4 random coordinates of every tensor
        int64_t i = t.offset + (int64_t)(rng.next_u64() % (uint64_t)t.numel);
        if (t.name == "wte" && i >= (int64_t)cfg.vocab_size * cfg.channels) continue;
        const float h_step = 1e-2f, orig = w[u][i];
        w[u][i] = orig + h_step;
        h.set_weights(w);
        double lp = h.model->forward(in.data(), tg.data(), B, T, *h.engine);
        w[u][i] = orig - h_step;
        h.set_weights(w);
        double lm = h.model->forward(in.data(), tg.data(), B, T, *h.engine);
        w[u][i] = orig;
        const double fd = (lp - lm) / (2 * h_step);
        EXPECT_NEAR(g[i], fd, 0.02 * std::fabs(fd) + 2e-4) << layout.unit(u).name << "." << t.name << "[" << i - t.offset << "]";
        checked++;
      }
    }
  }
  h.set_weights(w);
  EXPECT_GT(checked, 80);
}

TEST(FiniteDiff, PaddedVocabularyRowsGetNoGradient) {
  GPTConfig cfg = tiny_config(1, 1, 8, 4, 5);  // Vp = 128: rows 5..127 of wte are padding
  Harness h(cfg);
  h.init(3);
  std::vector<int> in = {0, 1, 2, 3}, tg = {1, 2, 3, 4};
  h.loss_and_grads(in, tg, 1, 4);
  std::vector<float> g = h.grads(0);
  for (int64_t i = (int64_t)cfg.vocab_size * cfg.channels; i < (int64_t)cfg.padded_vocab_size * cfg.channels; i++)
    ASSERT_EQ(g[i], 0.0f) << i;
}

}  // namespace
}  // namespace gpt::test
