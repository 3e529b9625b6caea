// See attention_plan.h.
#include "src/cli/attention_plan.h"

#include <cstdio>

#include "kernels/attention_rules.h"
#include "src/backend/backend.h"
#include "src/core/check.h"

namespace gpt {

// --attention as gpt train resolves it (against this machine's GPU, or an sm_90 one with this build's cuDNN
// when none is visible), and for cudnn the plans' workspace measured on the GPU when there is one (`measure`).
// As in training, auto falls back when cuDNN cannot plan the shape.
void resolve_planned_attention(MemPlanInput& in, const std::string& attention, DeviceKind device, bool measure) {
  AttentionTarget target;
  if (device == DeviceKind::cuda) target = planning_attention_target();
  const int C = in.cfg.channels, NH = in.cfg.num_heads;
  in.attention = resolve_attention_path(attention, target, C, NH);
  if (in.attention != AttentionPath::cudnn) return;
  try {
    check_cudnn_attention_sequence(in.T, target.cudnn.version);  // what the plans check, also without a GPU
    if (measure) in.cudnn_workspace = measured_cudnn_plan_workspace(in.B, in.T, C, NH);
  } catch (const Error& e) {
    if (attention != "auto") throw;
    in.attention = attention_fallback_without_cudnn(C, NH);
    std::fprintf(stderr, "warning: --attention auto: %s; planning --attention %s\n", e.what(),
                 attention_path_name(in.attention));
  }
}

}  // namespace gpt
