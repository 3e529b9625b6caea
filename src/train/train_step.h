// One optimizer step of training, written once: the Trainer runs it on real data, and the simulated machine
// (src/sim) runs the same function on a priced, unbacked one to plan memory and time. So the step's schedule
// (micro-steps, the wait for reductions, the loss read, the norm, AdamW, the final sync) has one statement.
#pragma once
#include <functional>

#include "src/dist/communicator.h"
#include "src/fsdp/sharding_engine.h"
#include "src/model/gpt.h"
#include "src/model/param_source.h"
#include "src/train/optimizer.h"

namespace gpt {

struct TrainStepSpec {
  int B = 1, T = 1;      // per-rank micro-batch
  int accum = 1;         // micro-steps per optimizer step
  float lr = 0;          // this step's learning rate
  int update = 1;        // AdamW's 1-based count if this step's update is applied
  OptimizerConfig optim;
  bool poison_loss = false;  // test hook: the loss reads as NaN (the step is then skipped)
};

struct TrainStepResult {
  float loss = 0;          // mean over the global batch
  double grad_norm = 0;    // before clipping
  bool skipped = false;    // non-finite loss or norm: no update applied
};

// The square of the global gradient norm, every parameter counted once (collective over the engine's groups
// and, with tensor parallelism, the model's).
double global_grad_sumsq(GPT& model, ShardingEngine& engine);

// next_batch(inputs, targets) fills B*T token ids each. `params` is what the model draws its units from: the
// engine itself, or an observer in front of it (the simulated machine's per-unit accounting).
TrainStepResult run_train_step(GPT& model, ShardingEngine& engine, ParamSource& params, Communicator& world,
                               const TrainStepSpec& spec, const std::function<void(int*, int*)>& next_batch);

}  // namespace gpt
