// See lr_schedule.h.
#include "src/train/lr_schedule.h"

#include <cmath>

namespace gpt {

float LrSchedule::at(int step) const {
  if (step < warmup) return peak * (float)(step + 1) / (float)warmup;
  const int decay_steps = total - warmup;
  if (decay_steps <= 1) return peak;
  double progress = (double)(step - warmup) / (double)(decay_steps - 1);
  if (progress > 1) progress = 1;
  const double min_lr = peak * min_lr_frac;
  return (float)(min_lr + 0.5 * (peak - min_lr) * (1.0 + std::cos(M_PI * progress)));
}

}  // namespace gpt
