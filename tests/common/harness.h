// A single-process model for tests: cpu backend (or the one named), world-size-1 communicator, FSDP engine
// (which then hands out parameters directly), and helpers to load weights and run steps without the Trainer.
#pragma once
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "src/backend/backend.h"
#include "src/dist/comm_world.h"
#include "src/fsdp/engine.h"
#include "src/model/gpt.h"
#include "src/train/optimizer.h"

namespace gpt::test {

struct Harness {
  std::unique_ptr<Communicator> comm;
  std::unique_ptr<Backend> be;
  std::unique_ptr<GPT> model;
  std::unique_ptr<FsdpEngine> engine;

  explicit Harness(const GPTConfig& cfg, RecomputePolicy rp = {}, FsdpOptions fo = {},
                   const std::string& device = "cpu") {
    comm = make_single_communicator();
    be = make_backend(device);
    model = std::make_unique<GPT>(*be, cfg, rp);
    engine = std::make_unique<FsdpEngine>(*be, *comm, model->layout(), fo);
  }
  void set_weights(const std::vector<std::vector<float>>& units) {
    for (int u = 0; u < (int)units.size(); u++) engine->set_unit_from_host(u, units[u].data());
  }
  void init(uint64_t seed) {
    const Layout& l = model->layout();
    for (int u = 0; u < l.num_units(); u++) {
      std::vector<float> w((size_t)l.unit(u).numel);
      GPT::init_unit(l, u, seed, w.data());
      engine->set_unit_from_host(u, w.data());
    }
  }
  // Loss and gradients (left in the grad shards) of one batch, the way the trainer runs a step: forward to
  // the logits, the loss computed by backward's classifier pass, read once at the end.
  float loss_and_grads(const std::vector<int>& in, const std::vector<int>& tg, int B, int T) {
    engine->begin_step();
    engine->begin_micro_step(true);
    model->forward_train(in.data(), tg.data(), B, T, *engine);
    model->backward(1.0f / (B * T), *engine);
    engine->finish_backward();
    return (float)(model->take_loss_sum() / ((double)B * T));
  }
  // One AdamW step after loss_and_grads; returns the loss.
  float train_step(const std::vector<int>& in, const std::vector<int>& tg, int B, int T, const OptimizerConfig& oc,
                   float lr, int step) {
    float loss = loss_and_grads(in, tg, B, T);
    adamw_step(*engine, oc, lr, step, std::sqrt(engine->grad_sumsq()));
    return loss;
  }
  std::vector<float> grads(int u) {
    std::vector<float> g;
    engine->shard_to_host(u, ShardState::grad, g);
    g.resize((size_t)engine->shard(u).numel);
    return g;
  }
  std::vector<float> params(int u) { return engine->gather_unit_to_host(u); }
};

}  // namespace gpt::test
