// See optimizer.h.
#include "src/train/optimizer.h"

namespace gpt {

float adamw_step(ShardingEngine& engine, const OptimizerConfig& cfg, float lr, int step, double grad_norm) {
  float scale = 1.0f;
  if (cfg.grad_clip > 0 && grad_norm > cfg.grad_clip) scale = (float)(cfg.grad_clip / (grad_norm + 1e-6));
  AdamWParams hp;
  hp.lr = lr;
  hp.beta1 = cfg.beta1;
  hp.beta2 = cfg.beta2;
  hp.eps = cfg.eps;
  hp.grad_scale = scale;
  hp.step = step;
  engine.update_params([&](Backend& states, const ShardSegment& s) {
    hp.weight_decay = s.decay ? cfg.weight_decay : 0.0f;
    states.adamw_update(s.param, s.grad, s.m, s.v, s.param_out, s.n, hp);
  });
  return scale;
}

}  // namespace gpt
