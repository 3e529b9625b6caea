// CUDA_CHECK: the CUDA runtime's leg of the project's one error path. Every cudaError_t other than
// cudaSuccess becomes a gpt::Error naming the call, the file and the line, and CUDA's own name and text
// for the error. It sits in core (below kernels, backend and dist) because all three make CUDA calls:
// the kernels, the cuda backend and its copy stream, the NCCL communicator. Needs the CUDA runtime
// headers: include it only from translation units built with CUDA (GPT_WITH_CUDA).
// CUDNN_CHECK is the same for cuDNN's status codes (builds with cuDNN, GPT_WITH_CUDNN): the call, the file
// and line, cudnnGetErrorString's text and cuDNN's own last message (cudnnGetLastErrorString) when it has one.
#pragma once
#include <cuda_runtime.h>
#ifdef GPT_WITH_CUDNN
#include <cudnn_graph.h>
#endif

#include "src/core/check.h"

namespace gpt {

// The errors after which the CUDA context is lost for good (the CUDA runtime's own words for each: "any
// further CUDA work will return the same error; the process must be terminated and relaunched"): a kernel's
// illegal or misaligned address, illegal instruction, stack error, bad pc, failed launch, timeout or assert,
// an error contained by the GPU, an external device's error.
inline bool cuda_error_is_sticky(cudaError_t e) {
  switch (e) {
    case cudaErrorIllegalAddress: case cudaErrorLaunchTimeout: case cudaErrorAssert:
    case cudaErrorHardwareStackError: case cudaErrorIllegalInstruction: case cudaErrorMisalignedAddress:
    case cudaErrorInvalidAddressSpace: case cudaErrorInvalidPc: case cudaErrorLaunchFailure:
    case cudaErrorContained: case cudaErrorExternalDevice:
      return true;
    default:
      return false;
  }
}

// Whether CUDA_CHECK has met a sticky error in this process: from then on nothing on the device can be waited
// for or freed, so the cuda backend's frees return at once (a destructor that threw would end the process
// before the error is printed).
inline bool& cuda_device_lost() {
  static bool lost = false;
  return lost;
}

}  // namespace gpt

namespace gpt::detail {

[[noreturn]] inline void cuda_fail(cudaError_t e, const char* expr, const char* file, int line) {
  const bool sticky = cuda_error_is_sticky(e);
  if (sticky) cuda_device_lost() = true;
  ::gpt::fail(file, ":", line, ": CUDA error ", cudaGetErrorName(e), " (", cudaGetErrorString(e), ") in ", expr,
              sticky ? " (a device fault, reported by the first CUDA call after the kernel that caused it: rerun "
                       "with CUDA_LAUNCH_BLOCKING=1 to name that kernel)"
                     : "");
}

#ifdef GPT_WITH_CUDNN
[[noreturn]] inline void cudnn_fail(cudnnStatus_t s, const char* expr, const char* file, int line) {
  char last[512] = {0};
  cudnnGetLastErrorString(last, sizeof last);
  for (char& c : last)
    if (c == '\n') c = ' ';  // one line
  ::gpt::fail(file, ":", line, ": cuDNN error ", cudnnGetErrorString(s), " (", static_cast<int>(s), ") in ", expr,
              last[0] ? ": " : "", last);
}
#endif

}  // namespace gpt::detail

#define CUDA_CHECK(call)                                                                                 \
  do {                                                                                                   \
    cudaError_t gpt_cuda_err_ = (call);                                                                  \
    if (gpt_cuda_err_ != cudaSuccess) ::gpt::detail::cuda_fail(gpt_cuda_err_, #call, __FILE__, __LINE__); \
  } while (0)

#ifdef GPT_WITH_CUDNN
#define CUDNN_CHECK(call)                                                  \
  do {                                                                     \
    cudnnStatus_t gpt_cudnn_st_ = (call);                                  \
    if (gpt_cudnn_st_ != CUDNN_STATUS_SUCCESS)                             \
      ::gpt::detail::cudnn_fail(gpt_cudnn_st_, #call, __FILE__, __LINE__); \
  } while (0)
#endif
