// See cuda_device.h.
#include "src/backend/cuda/cuda_device.h"

#include <cuda_runtime.h>

#include "kernels/cuda/attention_cudnn.cuh"
#include "src/core/cuda_check.h"
#include "src/core/check.h"

namespace gpt {

AttentionTarget cuda_device_attention_target(int device) {
  AttentionTarget t;
  t.cuda = true;
#ifdef GPT_WITH_CUDNN
  t.cudnn = cuda::CudnnAttention::target(device);
#else
  CUDA_CHECK(cudaDeviceGetAttribute(&t.cudnn.cc_major, cudaDevAttrComputeCapabilityMajor, device));
  CUDA_CHECK(cudaDeviceGetAttribute(&t.cudnn.cc_minor, cudaDevAttrComputeCapabilityMinor, device));
#endif
  return t;
}

int cuda_pick_device(int local_rank) {
  int count = 0;
  CUDA_CHECK(cudaGetDeviceCount(&count));
  GPT_CHECK(count > 0, "--device cuda: no CUDA GPU is visible (use --device cpu)");
  return local_rank % count;
}

bool cuda_device_visible() {
  int count = 0;
  const cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();  // no driver or no device: not an error here, just "not visible"
    return false;
  }
  return count > 0;
}

long long cuda_cudnn_compiled_version() {
#ifdef GPT_WITH_CUDNN
  return CUDNN_VERSION;
#else
  return 0;
#endif
}

std::optional<cuda::CudnnPlanWorkspace> cuda_cudnn_plan_workspace(int device, int B, int T, int C, int NH) {
#ifdef GPT_WITH_CUDNN
  CUDA_CHECK(cudaSetDevice(device));
  cudaStream_t stream = nullptr;
  CUDA_CHECK(cudaStreamCreate(&stream));
  struct StreamGuard {
    cudaStream_t s;
    ~StreamGuard() { cudaStreamDestroy(s); }
  } guard{stream};
  cuda::CudnnAttention attention(stream);
  return attention.plan(B, T, C, NH);
#else
  (void)device, (void)B, (void)T, (void)C, (void)NH;
  return std::nullopt;
#endif
}

}  // namespace gpt
