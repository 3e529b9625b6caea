// CUDA_CHECK: the CUDA runtime's leg of the project's one error path. Every cudaError_t other than
// cudaSuccess becomes a gpt::Error naming the call, the file and the line, and CUDA's own name and text
// for the error. It sits in core (below kernels, backend and dist) because all three make CUDA calls:
// the kernels, the cuda backend and its copy stream, the NCCL communicator. Needs the CUDA runtime
// headers: include it only from translation units built with CUDA (GPT_WITH_CUDA).
#pragma once
#include <cuda_runtime.h>

#include "src/core/check.h"

namespace gpt::detail {

[[noreturn]] inline void cuda_fail(cudaError_t e, const char* expr, const char* file, int line) {
  ::gpt::fail(file, ":", line, ": CUDA error ", cudaGetErrorName(e), " (", cudaGetErrorString(e), ") in ",
              expr);
}

}  // namespace gpt::detail

#define CUDA_CHECK(call)                                                                                 \
  do {                                                                                                   \
    cudaError_t gpt_cuda_err_ = (call);                                                                  \
    if (gpt_cuda_err_ != cudaSuccess) ::gpt::detail::cuda_fail(gpt_cuda_err_, #call, __FILE__, __LINE__); \
  } while (0)

// After every kernel launch: catches bad launch configurations at the launch site.
#define CUDA_CHECK_LAUNCH() CUDA_CHECK(cudaGetLastError())
