// Learning-rate schedule: linear warmup from 0 to the peak over `warmup` steps, then cosine decay to
// min_lr_frac * peak at the last step (GPT-2 / nanoGPT recipe).
#pragma once

namespace gpt {

struct LrSchedule {
  float peak = 3e-4f;
  int warmup = 0;
  int total = 1;
  float min_lr_frac = 0.1f;
  // step is 0-based: the rate used for the (step+1)-th update.
  float at(int step) const;
};

}  // namespace gpt
