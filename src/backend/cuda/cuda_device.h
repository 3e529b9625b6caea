// The GPU questions asked without a backend: whether any is visible, which one a node-local rank uses, what
// the attention paths meet on it, and the cuDNN build's version and attention plans' workspace (the memory
// plan reserves it before any backend exists). Defined in cuda_device.cu; no CUDA headers needed to call them.
#pragma once
#include <memory>
#include <optional>

#include "kernels/attention_rules.h"
#include "kernels/sizes.h"

namespace gpt {

class Backend;
std::unique_ptr<Backend> make_cuda_backend(int local_rank);  // cuda_backend.cu

// False (never an error) without a driver or a device.
bool cuda_device_visible();
// The GPU node-local rank `local_rank` uses: GPU local_rank % count. Throws gpt::Error when none is visible.
int cuda_pick_device(int local_rank);
// GPU `device`'s compute capability and, in builds with cuDNN, the cuDNN library loaded (attention_rules.h).
AttentionTarget cuda_device_attention_target(int device);
// CUDNN_VERSION of the build, 0 without cuDNN.
long long cuda_cudnn_compiled_version();
// The cuDNN attention plans' workspace for (B, T, C, NH) on GPU `device`; nullopt without cuDNN.
std::optional<cuda::CudnnPlanWorkspace> cuda_cudnn_plan_workspace(int device, int B, int T, int C, int NH);

}  // namespace gpt
