// AdamW's hyperparameters for one update of one contiguous segment. They live with the kernels (the
// ground floor: kernels/cpu and kernels/cuda both take them) so that no kernel header needs the backend
// interface; src/backend/backend.h includes this file for Backend::adamw_update.
#pragma once

namespace gpt {

struct AdamWParams {
  float lr = 3e-4f;
  float beta1 = 0.9f;
  float beta2 = 0.95f;
  float eps = 1e-8f;
  float weight_decay = 0.0f;  // already resolved per segment: 0 for biases, gains and embeddings' peers
  float grad_scale = 1.0f;    // multiplies the gradient first (global-norm clipping folds in here)
  int step = 1;               // 1-based, for bias correction
};

}  // namespace gpt
