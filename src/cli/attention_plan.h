// The attention path a planned run takes (gpt memplan, gpt plan): --attention resolved as gpt train resolves
// it, against this machine's GPU or, without one, an sm_90 GPU with this build's cuDNN.
#pragma once
#include <string>

#include "src/backend/device_info.h"
#include "src/plan/memplan.h"

namespace gpt {

// Sets in.attention (and for cudnn, when `measure` and a GPU is visible, the plans' measured workspace).
// auto falls back, with a warning, when cuDNN cannot plan the shape; an explicit path it cannot take throws.
void resolve_planned_attention(MemPlanInput& in, const std::string& attention, DeviceKind device, bool measure);

}  // namespace gpt
