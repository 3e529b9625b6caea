// The init rules (--init) against their closed forms. Both rules draw the same normals in the same order,
// so every matrix under `width` must be its `gpt2` twin times sqrt(768/C) exactly (up to the float rounding
// of one product), and the embeddings, biases and gains must be equal. The sample std of n normals has a
// relative standard deviation of 1/sqrt(2n), so a std is checked within 6 of those (a false failure once
// in ~10^9), and a mean within 6 std/sqrt(n).
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "src/model/gpt.h"
#include "src/model/layout.h"
#include "tests/common/tiny_config.h"

namespace gpt::test {
namespace {

std::vector<float> init(const Layout& l, int unit, InitRule rule) {
  std::vector<float> w((size_t)l.unit(unit).numel);  // (numel) flat fp32 params of the unit
  GPT::init_unit(l, unit, 1337, w.data(), rule);
  return w;
}

void expect_normal(const float* p, int64_t n, double std, const std::string& what) {
  double s1 = 0, s2 = 0;
  for (int64_t i = 0; i < n; i++) s1 += p[i], s2 += (double)p[i] * p[i];
  const double mean = s1 / n, sd = std::sqrt(s2 / n - mean * mean);
  EXPECT_NEAR(mean, 0.0, 6 * std / std::sqrt((double)n)) << what;
  EXPECT_NEAR(sd / std, 1.0, 6 / std::sqrt(2.0 * n)) << what;
}

TEST(Init, WidthRuleScalesTheMatricesOfGpt2ByItsClosedForm) {
  const GPTConfig cfg = tiny_config(2, 6, 48, 128, 257);
  const Layout layout(cfg);
  const double k = std::sqrt(768.0 / 48);  // 4: the std is 0.08 at C = 48
  EXPECT_DOUBLE_EQ(GPT::matrix_init_std(cfg, InitRule::gpt2), 0.02);
  EXPECT_DOUBLE_EQ(GPT::matrix_init_std(cfg, InitRule::width), 0.02 * k);
  int matrices = 0;
  for (int u = 0; u < layout.num_units(); u++) {
    const std::vector<float> g = init(layout, u, InitRule::gpt2), w = init(layout, u, InitRule::width);
    for (const TensorSpec& t : layout.unit(u).tensors) {
      const bool embedding = t.name == "wte" || t.name == "wpe", matrix = t.weight_decay && !embedding;
      const double scale = matrix ? k : 1.0;
      for (int64_t i = t.offset; i < t.offset + t.numel; i++)
        ASSERT_NEAR(w[i], g[i] * scale, 1e-6 * std::fabs(g[i] * scale)) << t.name << " [" << i - t.offset << "]";
      if (!matrix) continue;
      matrices++;
      const bool proj = t.name == "attprojw" || t.name == "fcprojw";
      const double std = 0.02 * k / (proj ? std::sqrt(2.0 * cfg.num_layers) : 1.0);
      expect_normal(w.data() + t.offset, t.numel, std, t.name + " under width");
    }
  }
  EXPECT_EQ(matrices, 4 * cfg.num_layers);  // qkv, attention projection, fc, fc projection per layer
}

TEST(Init, EmbeddingsStayAtGpt2sStdUnderBothRules) {
  const GPTConfig cfg = tiny_config(1, 2, 16, 128, 257);
  const Layout layout(cfg);
  const int u = layout.embed_unit();
  for (InitRule rule : {InitRule::gpt2, InitRule::width}) {
    const std::vector<float> w = init(layout, u, rule);
    for (const TensorSpec& t : layout.unit(u).tensors) {
      if (t.name != "wte" && t.name != "wpe") continue;  // the root unit holds the final layernorm too
      // wte's padded rows (vocab 257 -> Vp) are 0; only the real rows are drawn
      const int64_t n = t.name == "wte" ? (int64_t)cfg.vocab_size * cfg.channels : t.numel;
      expect_normal(w.data() + t.offset, n, 0.02, t.name + " under " + init_rule_name(rule));
      for (int64_t i = n; i < t.numel; i++) ASSERT_EQ(w[t.offset + i], 0.0f) << t.name << " padding";
    }
  }
}

TEST(Init, ParseNamesTheFlag) {
  EXPECT_EQ(parse_init_rule("gpt2"), InitRule::gpt2);
  EXPECT_EQ(parse_init_rule("width"), InitRule::width);
  try {
    parse_init_rule("xavier");
    FAIL() << "no error";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("--init"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace gpt::test
