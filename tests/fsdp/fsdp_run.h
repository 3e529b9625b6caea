// A minimal sharded training loop for the FSDP tests: the same global batch of sequences every rank
// count sees (rank r takes its rows of each micro-batch), AdamW with clipping, on any communicator.
// The single-process reference is the same loop on a world-size-1 communicator with one micro-step.
#pragma once
#include <cmath>
#include <memory>
#include <vector>

#include "src/backend/backend.h"
#include "src/dist/communicator.h"
#include "src/dist/mesh.h"
#include "src/fsdp/make_engine.h"
#include "src/model/gpt.h"
#include "src/train/train_step.h"
#include "src/train/whole_model.h"
#include "src/train/optimizer.h"

namespace gpt::test {

struct RunSpec {
  GPTConfig cfg;
  FsdpOptions fsdp;
  RecomputePolicy recompute;
  WrapPolicy wrap;
  TpOptions tp;  // tensor parallelism: the communicator's ranks form a (size / tp.size) x tp.size mesh
  bool offload_activations = false;
  int global_seqs = 24;  // sequences per optimizer step (all ranks, all micro-steps)
  int accum = 1;         // micro-steps per optimizer step
  int T = 8;
  uint64_t seed = 5;
  // The mean over the global batch split in two, as an N-rank run splits it: backward scales by
  // norm_split/(rows of the micro-step and micro-steps), and the reduced gradient is divided by norm_split
  // before the optimizer. The same step; for a norm_split that is not a power of 2 every value of the
  // backward rounds differently (noise_floor.h measures that). 1: no split. cpu backend, grads in host memory.
  int norm_split = 1;
  // The token stream: a pseudo-random one (stream_token), or this corpus (Tiny Shakespeare's bytes):
  // sequence j of step s starts at ((s * global_seqs + j) * (T + 1)) modulo its length.
  const std::vector<int>* corpus = nullptr;
  float lr = 2e-3f;  // AdamW's learning rate (constant)
};

// Token of sequence j of step s at position t (targets use t+1): a fixed pseudo-random stream.
inline int stream_token(int s, int j, int t, int V) {
  uint64_t x = (uint64_t)s * 1000003ULL + (uint64_t)j * 7919ULL + (uint64_t)t * 104729ULL + 17;
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdULL;
  x ^= x >> 33;
  return (int)(x % (uint64_t)V);
}

struct ShardedRun {
  RunSpec spec;
  Communicator& comm;
  std::unique_ptr<Backend> be;
  Mesh mesh;                           // tp.size > 1: the tensor- and data-parallel groups
  std::unique_ptr<TensorParallel> tp;  // tp.size > 1
  std::unique_ptr<GPT> model;
  std::unique_ptr<ShardingEngine> engine;  // the one s.fsdp.engine names
  OptimizerConfig oc;
  int step = 0;  // optimizer steps done

  ShardedRun(const RunSpec& s, Communicator& c) : spec(s), comm(c) {
    be = make_backend("cpu");
    if (s.tp.size > 1) {
      mesh = make_mesh(c, s.tp.size);
      tp = std::make_unique<TensorParallel>(*mesh.tp, s.tp.sequence_parallel, be->compute_dtype());
    }
    model = std::make_unique<GPT>(*be, s.cfg, s.recompute, s.wrap, s.offload_activations, tp.get());
    engine = make_engine(*be, dp(), model->layout(), s.fsdp);
    const Layout& l = model->layout();
    const Layout whole(s.cfg, s.wrap);  // the same values whatever the split (the trainer's init_params)
    for (int u = 0; u < l.num_units(); u++) {
      std::vector<float> w((size_t)whole.unit(u).numel), mine((size_t)l.unit(u).numel, 0.0f);
      GPT::init_unit(whole, u, s.seed, w.data());
      std::vector<const float*> src((size_t)whole.num_units(), nullptr);
      src[(size_t)u] = w.data();
      copy_unit(l, u, whole, src, mine.data());
      engine->set_unit_from_host(u, mine.data());
    }
  }

  Communicator& dp() { return mesh.dp ? *mesh.dp : comm; }  // the data-parallel ranks: the engine's

  int token(int s, int j, int t) const {
    if (!spec.corpus) return stream_token(s, j, t, spec.cfg.vocab_size);
    const std::vector<int>& c = *spec.corpus;
    const size_t at = ((size_t)s * spec.global_seqs + (size_t)j) * (size_t)(spec.T + 1) + (size_t)t;
    return c[at % c.size()];
  }

  // One optimizer step; returns the global mean loss.
  float train_step(float lr = -1) {
    if (lr < 0) lr = spec.lr;
    const int N = dp().world(), r = dp().rank(), T = spec.T;
    const int B = spec.global_seqs / (spec.accum * N);
    engine->begin_step();
    double loss = 0;
    std::vector<int> in((size_t)B * T), tg(in.size());
    for (int k = 0; k < spec.accum; k++) {
      engine->begin_micro_step(k == spec.accum - 1);
      for (int b = 0; b < B; b++) {
        const int j = k * (spec.global_seqs / spec.accum) + r * B + b;
        for (int t = 0; t < T; t++) {
          in[b * T + t] = token(step, j, t);
          tg[b * T + t] = token(step, j, t + 1);
        }
      }
      model->forward_train(in.data(), tg.data(), B, T, *engine);  // the trainer's path: loss in backward
      model->backward((float)spec.norm_split / ((float)B * T * spec.accum), *engine);
    }
    engine->finish_backward();
    loss = model->take_loss_sum() / ((double)B * T * spec.accum);  // per-token losses do not depend on the scale
    if (spec.norm_split != 1) {
      std::vector<float> g;
      for (int u = 0; u < engine->num_units(); u++) {
        engine->shard_to_host(u, ShardState::grad, g);
        for (float& x : g) x /= (float)spec.norm_split;
        engine->shard_from_host(u, ShardState::grad, g);
      }
    }
    if (comm.world() > 1) loss = comm.all_reduce_scalar(loss, ReduceOp::avg);
    const double norm = std::sqrt(global_grad_sumsq(*model, *engine));
    step++;
    adamw_step(*engine, oc, lr, step, norm);
    return (float)loss;
  }

  // Every unit's full parameters, in the default layout's units (Layout(cfg)) whatever the run's wrap, so runs
  // under two wraps compare element for element.
  std::vector<std::vector<float>> params() {
    const std::vector<std::vector<float>> mine = whole_model_units(*be, *engine, *model);
    std::vector<const float*> ptrs;
    for (const std::vector<float>& u : mine) ptrs.push_back(u.data());
    const Layout def(spec.cfg);
    std::vector<std::vector<float>> out;
    for (int u = 0; u < def.num_units(); u++) {
      out.emplace_back((size_t)def.unit(u).numel, 0.0f);
      copy_unit(def, u, Layout(spec.cfg, spec.wrap), ptrs, out.back().data());
    }
    return out;
  }
};

}  // namespace gpt::test
