// See optimizer.h.
#include "src/train/optimizer.h"

#include <algorithm>

#include "kernels/cpu/ops.h"

namespace gpt {

float adamw_step(Backend& be, FsdpEngine& engine, const OptimizerConfig& cfg, float lr, int step, double grad_norm) {
  float scale = 1.0f;
  if (cfg.grad_clip > 0 && grad_norm > cfg.grad_clip) scale = (float)(cfg.grad_clip / (grad_norm + 1e-6));
  AdamWParams hp;
  hp.lr = lr;
  hp.beta1 = cfg.beta1;
  hp.beta2 = cfg.beta2;
  hp.eps = cfg.eps;
  hp.grad_scale = scale;
  hp.step = step;
  const Layout& layout = engine.layout();
  for (int u = 0; u < engine.num_units(); u++) {
    UnitShard& s = engine.unit(u);
    const int64_t lo = s.shard_offset, hi = s.shard_offset + s.shard_numel;
    // Padding past the last tensor has zero grad: give it to the last tensor's segment (any wd keeps 0).
    for (const TensorSpec& t : layout.unit(u).tensors) {
      const int64_t t_hi = (&t == &layout.unit(u).tensors.back()) ? hi : t.offset + t.numel;
      const int64_t a = std::max(lo, t.offset), b = std::min(hi, t_hi);
      if (a >= b) continue;
      hp.weight_decay = t.weight_decay ? cfg.weight_decay : 0.0f;
      const int64_t off = a - lo;
      if (engine.host_states())
        cpu::adamw_update(s.param + off, s.grad + off, s.m + off, s.v + off, (size_t)(b - a), hp);
      else
        be.adamw_update(s.param + off, s.grad + off, s.m + off, s.v + off, (size_t)(b - a), hp);
    }
  }
  engine.sync_device_copies();
  engine.on_params_updated();
  return scale;
}

}  // namespace gpt
