// A check of the cudnn attention path that needs no GPU: the forward and backward operation graphs of
// attention_cudnn_graph.cu built for a device that a JSON description stands for (cuDNN's deviceless planning,
// CUDNN_BACKEND_DEVICEPROP_DESCRIPTOR, cuDNN 9.8 and newer), and what cuDNN makes of them: how many engine
// configs its heuristics offer (an engine offers itself only for a graph it recognises), the first one's
// workspace, and how finalizing its execution plan went. Plain C++ types, so host tests can call it;
// defined in attention_cudnn_graph.cu, in builds with cuDNN (GPT_WITH_CUDNN).
//
// cuDNN's runtime-compiled engines (flash attention's) offer themselves only when libcuda can be loaded. On a
// machine without a driver, the CUDA toolkit's stub libcuda stands in: cuDNN then recognises the graph and
// compiles its kernels, and finalizing the plan stops where the kernels would be loaded onto a GPU
// (CUDNN_STATUS_EXECUTION_FAILED_CUDA_DRIVER, cuLibraryLoadData returning CUDA_ERROR_STUB_LIBRARY).
#pragma once
#include <string>

namespace gpt::cuda {

struct CudnnGraphCheck {
  long long configs = 0;         // engine configs the heuristics offer (mode A, else fallback)
  long long workspace = -1;      // bytes the first config needs (CUDNN_ATTR_ENGINECFG_WORKSPACE_SIZE); -1: none
  int plan_status = -1;          // cudnnStatus_t of finalizing the first config's execution plan; -1: none
  std::string plan_status_name;  // cudnnGetErrorString of it
  std::string message;           // cuDNN's last message (cudnnGetLastErrorString), on one line
};

struct CudnnDevicelessCheck {
  CudnnGraphCheck forward, backward;
};

#ifdef GPT_WITH_CUDNN
// The graphs of attention at (B, T, C, NH), T >= 2, on the device `device_json` describes (the JSON form of a
// CUDNN_BACKEND_DEVICEPROP_DESCRIPTOR). Throws gpt::Error when cuDNN refuses a descriptor outright.
CudnnDevicelessCheck cudnn_attention_deviceless_check(int B, int T, int C, int NH, const std::string& device_json);
// cudnnGetVersion() of the cuDNN library loaded (9.19.0 = 91900): deviceless planning needs 9.8 or newer.
long long cudnn_loaded_version();
#endif

}  // namespace gpt::cuda
