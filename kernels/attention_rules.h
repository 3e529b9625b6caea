// What the fused attention kernels (kernels/cuda/attention_fused.cu) can run: they are instantiated for a
// fixed set of head sizes (a tile holds one head's 32 or 64 channels), so the rule lives here with them.
// Pure and host-only, so the kernels, the backends and the memory planner (src/plan) all ask this one
// place. Whether a backend has the fused path at all is the backend's business (src/backend/backend.h).
#pragma once
#include "src/core/check.h"

namespace gpt {

// The head sizes C / NH the fused kernels are instantiated for.
constexpr int kFusedAttentionHeadSizes[] = {32, 64};

inline bool fused_attention_supports_head_size(int hs) {
  for (int s : kFusedAttentionHeadSizes)
    if (hs == s) return true;
  return false;
}

// Throws the flag's one-line error unless C splits into NH heads of a size the fused kernels have.
inline void check_fused_attention_heads(int C, int NH) {
  GPT_CHECK(NH > 0 && C % NH == 0, "--attention fused: channels ", C, " not divisible by heads ", NH);
  const int hs = C / NH;
  GPT_CHECK(fused_attention_supports_head_size(hs), "--attention fused: supports head sizes 32 and 64, this model has ",
            hs, " (use --attention simple)");
}

}  // namespace gpt
