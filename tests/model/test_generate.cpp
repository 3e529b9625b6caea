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
#include "tests/common/generate_golden.h"

namespace gpt::test {
namespace {

// What gpt eval and gpt sample load a model into (cmd_tools.cpp): one rank holding everything, parameters only.
FsdpOptions inference_options() {
  FsdpOptions fo;
  fo.strategy = ShardStrategy::none;
  fo.inference = true;
  return fo;
}

TEST(Generate, CachedLogitsMatchPyTorch) {
  const ModelWeights w = load_model_file(golden_d2("model.bin"));
  Harness h(w.config, {}, inference_options());
  h.set_weights(w.units);
  expect_cached_within_bound(generate_errors(h), 0x1p-24);
}

TEST(Generate, GreedyTokensMatchPyTorch) {
  const ModelWeights w = load_model_file(golden_d2("model.bin"));
  Harness h(w.config, {}, inference_options());
  h.set_weights(w.units);
  SampleParams greedy;
  greedy.temperature = 0;
  Rng rng(1);
  for (const GenerateCase& k : load_generate_cases()) {
    if (k.name == "forced") continue;  // its tokens are given, not chosen
    std::vector<int> streamed;
    const std::vector<int> got = generate(*h.model, *h.engine, k.prompt, (int)k.tokens.size(), greedy, rng,
                                          [&](int id) { streamed.push_back(id); });
    EXPECT_EQ(got, k.tokens) << k.name;
    EXPECT_EQ(streamed, k.tokens) << k.name;
  }
}

TEST(Generate, CacheRefusesWhatDoesNotFit) {
  const ModelWeights w = load_model_file(golden_d2("model.bin"));
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
  const ModelWeights w = load_model_file(golden_d2("model.bin"));
  const GPTConfig& c = w.config;
  const FsdpOptions fo = inference_options();
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
  // forward works (the generation tests above run on such an engine); backward does not
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

// gpt sample's memory plan (MemPlanInput::sampling) is what sampling allocates: the inference engine and a
// key/value cache, byte for byte in the ledger.
TEST(Generate, SamplingMemoryIsPlannedExactly) {
  const ModelWeights w = load_model_file(golden_d2("model.bin"));
  const GPTConfig& c = w.config;
  Harness h(c, {}, inference_options());
  h.set_weights(w.units);
  KvCache kv(*h.be, c, 12);
  MemPlanInput run;
  run.cfg = c;
  run.fsdp = inference_options();
  run.B = 1;
  run.T = 12;
  run.sampling = true;
  const MemPlan plan = plan_memory(run);
  const MemoryLedger& led = h.be->ledger();
  for (int cat = 0; cat < kMemCats; cat++)
    EXPECT_EQ(plan.at(MemDomain::device, (MemCat)cat), led.current(MemDomain::device, (MemCat)cat)) << cat;
  EXPECT_EQ(plan.device_peak, led.current_total(MemDomain::device));
  EXPECT_EQ(kv_cache_bytes(c, 12, 4), led.current(MemDomain::device, MemCat::activation));
}

}  // namespace
}  // namespace gpt::test
