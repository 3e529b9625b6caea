// Text generation with the key/value cache against PyTorch (scripts/make_generate_golden.py, fixture
// tests/fixtures/golden_d2/generate.json): the logits of every step of three cases (a short prompt decoded
// greedily past the model's 16 positions, so the window slides; a prompt longer than the window; a forced
// continuation whose windows hold varied tokens) through next_token_logits, the function generate() uses;
// generate()'s greedy tokens; and the inference engine (eval, sample) holding parameters only.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "src/core/check.h"
#include "src/io/model_file.h"
#include "src/plan/memplan.h"
#include "src/train/generate.h"
#include "tests/common/harness.h"
#include "tests/common/json_lite.h"
#include "tests/common/test_paths.h"

namespace gpt::test {
namespace {

std::string fixture(const std::string& f) { return source_dir() + "/tests/fixtures/golden_d2/" + f; }

struct Case {
  std::string name;
  std::vector<int> prompt, tokens;         // the prompt; the token appended after each step
  std::vector<std::vector<double>> logits;  // [step] PyTorch's fp64 logits over the V real columns
};

std::vector<Case> load_cases() {
  const std::string text = read_log(fixture("generate.json"));
  EXPECT_FALSE(text.empty()) << fixture("generate.json");
  const JValue doc = JsonParser(text).parse();
  std::vector<Case> cases;
  for (const JValue& c : doc.at("cases").arr) {
    Case k;
    k.name = c.at("name").str;
    for (const JValue& t : c.at("prompt").arr) k.prompt.push_back((int)t.num);
    for (const JValue& s : c.at("steps").arr) {
      k.tokens.push_back((int)s.at("token").num);
      std::vector<double> row;
      for (const JValue& x : s.at("logits").arr) row.push_back(x.num);
      k.logits.push_back(row);
    }
    cases.push_back(k);
  }
  EXPECT_EQ(cases.size(), 3u);
  return cases;
}

// The first V of the Vp logits at `p` (the cpu backend's compute dtype is fp32, on the host).
std::vector<float> real_logits(const void* p, const GPTConfig& c) {
  const float* f = static_cast<const float*>(p);
  return std::vector<float>(f, f + c.vocab_size);
}

double max_diff(const std::vector<float>& a, const std::vector<double>& b) {
  double m = 0;
  for (size_t i = 0; i < b.size(); i++) m = std::max(m, std::fabs((double)a[i] - b[i]));
  return m;
}

// Every step's logits from the cache (next_token_logits) and, for the bound, from a forward over the same
// window, each against PyTorch's fp64. The bound is derived from the full forward's own fp32 error, the path
// tests/model/test_golden.cpp holds to PyTorch: both paths run the same ops on the same rows and differ only
// in the order of the sums inside the products and the attention (one row against all rows at once), so
// their errors are the same kind (tests/fsdp/noise_floor.h derives the multiple: at most twice the
// roundings, x2; one more draw against a floor estimated from samples, x8). The floor is at least the 2u of
// rounding each logit once. A decoding bug (a window off by one token, a window that does not slide, keys
// of the wrong position) moves the logits by 1.6e-3 to 0.29 (measured with the fixture's script).
TEST(Generate, CachedLogitsMatchPyTorch) {
  const ModelWeights w = load_model_file(fixture("model.bin"));
  const GPTConfig& c = w.config;
  Harness h(c);
  h.set_weights(w.units);
  double floor = 0, cached_err = 0, max_logit = 0;
  for (const Case& k : load_cases()) {
    const int capacity = std::min<int>(c.max_seq_len, (int)(k.prompt.size() + k.tokens.size()));
    KvCache kv(*h.be, c, capacity);
    std::vector<int> toks = k.prompt;
    for (size_t s = 0; s < k.tokens.size(); s++) {
      const std::vector<float> cached = real_logits(next_token_logits(*h.model, *h.engine, toks, kv), c);
      const int len = std::min<int>((int)toks.size(), c.max_seq_len);
      std::vector<int> window(toks.end() - len, toks.end());
      h.model->forward(window.data(), nullptr, 1, len, *h.engine);
      const char* last = static_cast<const char*>(h.model->logits()) + (size_t)(len - 1) * c.padded_vocab_size * 4;
      const std::vector<float> full = real_logits(last, c);
      floor = std::max(floor, max_diff(full, k.logits[s]));
      cached_err = std::max(cached_err, max_diff(cached, k.logits[s]));
      for (double x : k.logits[s]) max_logit = std::max(max_logit, std::fabs(x));
      ASSERT_EQ(kv.length(), len) << k.name << " step " << s;
      toks.push_back(k.tokens[s]);
    }
  }
  floor = std::max(floor, 2 * 0x1p-24 * max_logit);
  const double bound = 2 * 8 * floor;
  EXPECT_LE(cached_err, bound) << "full forward's error " << floor;
  std::printf("cached logits: max error %.3g against PyTorch fp64, full forward %.3g, bound %.3g\n", cached_err,
              floor, bound);
}

TEST(Generate, GreedyTokensMatchPyTorch) {
  const ModelWeights w = load_model_file(fixture("model.bin"));
  Harness h(w.config);
  h.set_weights(w.units);
  SampleParams greedy;
  greedy.temperature = 0;
  Rng rng(1);
  for (const Case& k : load_cases()) {
    if (k.name == "forced") continue;  // its tokens are given, not chosen
    std::vector<int> streamed;
    const std::vector<int> got = generate(*h.model, *h.engine, k.prompt, (int)k.tokens.size(), greedy, rng,
                                          [&](int id) { streamed.push_back(id); });
    EXPECT_EQ(got, k.tokens) << k.name;
    EXPECT_EQ(streamed, k.tokens) << k.name;
  }
}

TEST(Generate, CacheRefusesWhatDoesNotFit) {
  const ModelWeights w = load_model_file(fixture("model.bin"));
  const GPTConfig& c = w.config;
  Harness h(c);
  h.set_weights(w.units);
  EXPECT_THROW(KvCache(*h.be, c, c.max_seq_len + 1), Error);
  EXPECT_THROW(KvCache(*h.be, c, 0), Error);
  KvCache kv(*h.be, c, 4);
  const std::vector<int> five = {1, 2, 3, 4, 5}, bad = {c.vocab_size};
  EXPECT_THROW(h.model->forward_cached(five.data(), 5, kv, *h.engine), Error);  // 5 positions in 4
  EXPECT_THROW(h.model->forward_cached(bad.data(), 1, kv, *h.engine), Error);   // outside the vocabulary
  h.model->forward_cached(five.data(), 3, kv, *h.engine);
  EXPECT_EQ(kv.length(), 3);
  EXPECT_THROW(h.model->forward_cached(five.data(), 2, kv, *h.engine), Error);  // 3 + 2 > 4
  std::vector<int> toks = {1, 2, 3, 4, 5};  // the cache holds 3 positions, not 4: a caller out of step
  EXPECT_THROW(next_token_logits(*h.model, *h.engine, toks, kv), Error);
}

// eval and sample load the model into an engine that holds the fp32 parameters only: the ledger shows no
// gradient or Adam state, memplan counts the same, and a training step on it fails with a clear error.
TEST(Generate, InferenceEngineHoldsParametersOnly) {
  const ModelWeights w = load_model_file(fixture("model.bin"));
  const GPTConfig& c = w.config;
  FsdpOptions fo;
  fo.strategy = ShardStrategy::none;
  fo.inference = true;
  Harness h(c, {}, fo);
  h.set_weights(w.units);
  const MemoryLedger& led = h.be->ledger();
  EXPECT_EQ(led.current(MemDomain::device, MemCat::grad_shard), 0);
  EXPECT_EQ(led.current(MemDomain::device, MemCat::optim_state), 0);
  EXPECT_EQ(led.current(MemDomain::device, MemCat::param_shard), 4 * h.engine->geometry().shard_elems());
  EXPECT_EQ(h.engine->model_state_bytes(), 4 * h.engine->geometry().shard_elems());
  MemPlanInput run;
  run.cfg = c;
  run.fsdp = fo;
  run.B = 1;
  run.T = 8;
  const MemPlan plan = plan_memory(run);
  for (MemCat cat : {MemCat::param_shard, MemCat::grad_shard, MemCat::optim_state, MemCat::gathered_param,
                     MemCat::gathered_grad})
    EXPECT_EQ(plan.at(MemDomain::device, cat), led.current(MemDomain::device, cat)) << (int)cat;
  EXPECT_EQ(plan.model_state_bytes(), h.engine->model_state_bytes());
  // forward works (the generation above ran on such an engine through the CLI); backward does not
  const std::vector<int> in(8, 1), tg(8, 2);
  EXPECT_NO_THROW(h.model->forward(in.data(), tg.data(), 1, 8, *h.engine));
  try {
    h.loss_and_grads(in, tg, 1, 8);
    ADD_FAILURE() << "a training step ran on an inference engine";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("inference engine"), std::string::npos) << e.what();
  }
  std::vector<float> out;
  EXPECT_THROW(h.engine->shard_to_host(0, ShardState::adam_m, out), Error);
}

}  // namespace
}  // namespace gpt::test
