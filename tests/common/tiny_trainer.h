// The Trainer's options for a small CPU run on a learnable shard that tests write: 2 layers, 2 heads,
// C = 32, T = 16, V = 61, B = 4, 8 steps, no tokenizer, a stated MFU peak (so no start-up measurement).
#pragma once
#include <string>

#include "src/train/train_options.h"
#include "tests/common/learnable_shard.h"
#include "tests/common/tiny_config.h"

namespace gpt::test {

inline TrainOptions tiny_train_options(const std::string& dir) {
  TrainOptions o;
  o.model = tiny_config(2, 2, 32, 16, 61);
  o.config_name = "custom";
  o.train_pattern = write_learnable_shard(dir, 61, 20000, 1);
  o.B = 4;
  o.T = 16;
  o.steps = 8;
  o.lr = 3e-3f;
  o.warmup = 2;
  o.device = "cpu";
  o.quiet = true;
  o.tokenizer = "none";
  o.peak_tflops = 1;
  return o;
}

}  // namespace gpt::test
