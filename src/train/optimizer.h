// AdamW over this rank's shards, through the engine's segment view (ShardingEngine::update_params): each
// segment lies in one tensor, so weight decay applies to matrices and embeddings only (never biases or
// layernorm parameters), and runs on whichever backend holds the states (the device, or the host when
// offloaded). Global grad-norm clipping folds into the update as a gradient scale.
#pragma once
#include "src/fsdp/sharding_engine.h"

namespace gpt {

struct OptimizerConfig {
  float beta1 = 0.9f, beta2 = 0.95f, eps = 1e-8f;
  float weight_decay = 0.1f;
  float grad_clip = 1.0f;  // 0 disables clipping
};

// Applies one AdamW step (1-based `step`) with learning rate lr. grad_norm is the global L2 norm of the
// reduced gradient (ShardingEngine::grad_sumsq). Returns the gradient scale used (1 when not clipped).
float adamw_step(ShardingEngine& engine, const OptimizerConfig& cfg, float lr, int step, double grad_norm);

}  // namespace gpt
