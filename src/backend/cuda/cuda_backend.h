// What the CUDA backend exposes beyond the Backend interface: for the pieces that must order their own GPU
// work against the backend's (the NCCL communicator), the compute stream every op and copy is queued on and
// the device the backend selected; for reports and tests, the ledger set against the driver's count of
// device memory, and the number of cuBLASLt plans cached. Needs the CUDA runtime headers: include only where
// GPT_WITH_CUDA is defined.
#pragma once
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "src/backend/backend.h"

namespace gpt {

// The stream every op and copy of `backend` is queued on. Throws gpt::Error unless it is the cuda backend.
cudaStream_t cuda_compute_stream(Backend& backend);
// The CUDA device `backend` selected with cudaSetDevice at construction. Same error as above.
int cuda_backend_device(Backend& backend);

// The most the driver rounds one cudaMalloc up by (its large-page size).
constexpr int64_t kCudaAllocGranularity = int64_t{2} << 20;

// The ledger's device bytes against the driver's. driver_bytes is cudaMemGetInfo's total - free now minus
// the same at backend construction (after the CUDA context and the cuBLASLt handle existed), so it also
// counts what the ledger cannot see: allocation rounding (at most slack_bytes), kernel code loaded on first
// launch, library-internal buffers (NCCL's), and any other process's allocations on the same GPU.
struct CudaMemoryCheck {
  int64_t ledger_bytes = 0;      // the ledger's device total
  int64_t driver_bytes = 0;      // device bytes in use now minus at construction (driver's view)
  int64_t live_allocations = 0;  // device blocks the backend holds (cudaMalloc not yet freed)
  int64_t slack_bytes = 0;       // kCudaAllocGranularity per live block
};
CudaMemoryCheck cuda_memory_check(Backend& backend);
// Distinct products planned by the backend's cuBLASLt cache so far (one per shape key). Same error as above.
size_t cuda_gemm_plan_count(Backend& backend);
// cuDNN attention plans the backend has built so far (forward and backward of each shape count apart; 0
// without cuDNN or before the cudnn path was chosen). Same error as above.
size_t cuda_cudnn_plan_count(Backend& backend);

}  // namespace gpt
