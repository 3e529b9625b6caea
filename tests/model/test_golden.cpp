// The whole model against an independent PyTorch implementation (scripts/make_golden.py, fixture in
// tests/fixtures/golden_d2): same weights and tokens must give the same loss (1e-5 relative), the same
// gradients (1e-4 relative, with an absolute floor for analytically-zero entries), and the same losses
// over 10 AdamW steps with weight decay on the matrices and embeddings (not biases or layernorms) and
// global-norm clipping.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <regex>

#include "tests/common/harness.h"
#include "tests/common/test_paths.h"
#include "src/io/atomic_file.h"
#include "src/io/model_file.h"

namespace gpt::test {
namespace {

std::string fixture(const std::string& f) { return source_dir() + "/tests/fixtures/golden_d2/" + f; }

// Numbers of a JSON array `"key": [a, b, ...]` (the fixture's own simple layout).
std::vector<double> json_array(const std::string& text, const std::string& key) {
  std::smatch m;
  EXPECT_TRUE(std::regex_search(text, m, std::regex("\"" + key + "\": \\[([^\\]]*)\\]"))) << key;
  std::vector<double> out;
  std::string body = m[1];
  for (size_t p = 0; p < body.size();) {
    size_t e = body.find(',', p);
    out.push_back(std::stod(body.substr(p, e - p)));
    if (e == std::string::npos) break;
    p = e + 1;
  }
  return out;
}

double json_number(const std::string& text, const std::string& key) {
  std::smatch m;
  EXPECT_TRUE(std::regex_search(text, m, std::regex("\"" + key + "\": ([-0-9.eE+]+)"))) << key;
  return std::stod(m[1]);
}

struct Golden {
  ModelWeights weights, grads;
  std::vector<int> in, tg;
  int B = 2, T = 8;
  std::string json;
};

Golden load_golden() {
  Golden g;
  g.weights = load_model_file(fixture("model.bin"));
  // grads.bin is the body of a model file in the same tensor order: give it model.bin's header to convert it
  std::string model = read_file(fixture("model.bin")), grads = read_file(fixture("grads.bin"));
  const std::string tmp = scratch_dir() + "/grads_as_model.bin";
  std::string both = model.substr(0, 1024) + grads;
  write_file_atomic(tmp, both.data(), both.size());
  g.grads = load_model_file(tmp);
  std::string toks = read_file(fixture("tokens.bin"));
  EXPECT_EQ(toks.size(), (size_t)2 * g.B * g.T * 4);
  const int* p = reinterpret_cast<const int*>(toks.data());
  g.in.assign(p, p + g.B * g.T);
  g.tg.assign(p + g.B * g.T, p + 2 * g.B * g.T);
  g.json = read_file(fixture("expected.json"));
  return g;
}

TEST(Golden, LossAndGradientsMatchPyTorch) {
  Golden g = load_golden();
  Harness h(g.weights.config);
  h.set_weights(g.weights.units);
  const float loss = h.loss_and_grads(g.in, g.tg, g.B, g.T);
  const double expect = json_number(g.json, "loss");
  EXPECT_NEAR(loss, expect, 1e-5 * std::fabs(expect));
  const Layout& layout = h.model->layout();
  for (int u = 0; u < layout.num_units(); u++) {
    std::vector<float> ours = h.grads(u);
    const std::vector<float>& ref = g.grads.units[u];
    // floor: 1e-4 of the largest reference gradient in the unit, for entries that are ~0 analytically
    double scale = 0;
    for (float x : ref) scale = std::max(scale, (double)std::fabs(x));
    for (size_t i = 0; i < ref.size(); i++)
      ASSERT_NEAR(ours[i], ref[i], 1e-4 * std::fabs(ref[i]) + 1e-4 * scale * 1e-2)
          << layout.unit(u).name << " element " << i;
  }
}

TEST(Golden, TenAdamWStepsMatchPyTorch) {
  Golden g = load_golden();
  Harness h(g.weights.config);
  h.set_weights(g.weights.units);
  OptimizerConfig oc;
  oc.weight_decay = (float)json_number(g.json, "weight_decay");
  oc.grad_clip = (float)json_number(g.json, "grad_clip");
  const float lr = (float)json_number(g.json, "lr");
  std::vector<double> expect = json_array(g.json, "losses_10_steps");
  std::vector<double> norms = json_array(g.json, "grad_norms_10_steps");
  ASSERT_EQ(expect.size(), 10u);
  for (int s = 0; s < 10; s++) {
    float loss = h.loss_and_grads(g.in, g.tg, g.B, g.T);
    double norm = std::sqrt(h.engine->grad_sumsq());
    EXPECT_NEAR(loss, expect[s], 1e-5 * expect[s]) << "step " << s + 1;
    EXPECT_NEAR(norm, norms[s], 1e-4 * norms[s]) << "step " << s + 1;
    adamw_step(*h.engine, oc, lr, s + 1, norm);
  }
}

}  // namespace
}  // namespace gpt::test
