// See train_step.h.
#include "src/train/train_step.h"

#include <cmath>
#include <vector>

#include "src/util/trace.h"

namespace gpt {

// With tensor parallelism each rank's engine holds its slices of the split tensors and a whole copy of each
// replicated one (the same on every rank of the group: GPT::sum_replicated_grads), so the split tensors' sums
// are added over the group and the replicated ones counted once.
double global_grad_sumsq(GPT& model, ShardingEngine& engine) {
  TensorParallel* tp = model.tensor_parallel();
  if (!tp) return engine.grad_sumsq();
  const double split = engine.grad_sumsq([](const TensorSpec& t) { return t.split != TpSplit::none; });
  const double whole = engine.grad_sumsq([](const TensorSpec& t) { return t.split == TpSplit::none; });
  return tp->group().all_reduce_scalar(split, ReduceOp::sum) + whole;
}

TrainStepResult run_train_step(GPT& model, ShardingEngine& engine, ParamSource& params, Communicator& world,
                               const TrainStepSpec& spec, const std::function<void(int*, int*)>& next_batch) {
  std::vector<int> inputs((size_t)spec.B * spec.T), targets(inputs.size());  // (B, T) host token ids
  engine.begin_step();
  const double tokens = (double)spec.B * spec.T * spec.accum;  // this rank's tokens in the step
  const float dloss = 1.0f / ((float)spec.B * spec.T * spec.accum);
  // The loss is computed in backward (one classifier pass: loss and dlogits) and summed on the device; the
  // micro-steps never wait for it, and the step reads it once below.
  for (int micro = 0; micro < spec.accum; micro++) {
    engine.begin_micro_step(micro == spec.accum - 1);
    {
      trace::Scope ts(trace::kData, "next_batch", "data");
      next_batch(inputs.data(), targets.data());
    }
    model.forward_train(inputs.data(), targets.data(), spec.B, spec.T, params);
    model.backward(dloss, params);
  }
  {
    trace::Scope ts(trace::kCompute, "wait for reductions", "comm");
    engine.finish_backward();
  }
  TrainStepResult r;
  const double mean = model.take_loss_sum() / tokens;
  r.loss = (float)(world.world() > 1 ? world.all_reduce_scalar(mean, ReduceOp::avg) : mean);
  r.grad_norm = std::sqrt(global_grad_sumsq(model, engine));
  if (spec.poison_loss) r.loss = NAN;
  r.skipped = !std::isfinite(r.loss) || !std::isfinite(r.grad_norm);
  if (!r.skipped) {
    trace::Scope ts(trace::kOptimizer, "adamw", "optimizer");
    adamw_step(engine, spec.optim, spec.lr, spec.update, r.grad_norm);
  }
  model.backend().synchronize();
  trace::resolve();  // the device times of the step's spans (GPU streams), now that the streams passed them
  return r;
}

}  // namespace gpt
