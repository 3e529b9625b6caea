// What the CUDA backend exposes beyond the Backend interface, for the pieces that must order their own GPU
// work against the backend's (the NCCL communicator): the compute stream every op and copy is queued on,
// and the device the backend selected. Include only in CUDA translation units.
#pragma once
#include <cuda_runtime.h>

#include "backend/backend.h"

namespace gpt {

// The stream every op and copy of `backend` is queued on. Throws gpt::Error unless it is the cuda backend.
cudaStream_t cuda_compute_stream(Backend& backend);
// The CUDA device `backend` selected with cudaSetDevice at construction. Same error as above.
int cuda_backend_device(Backend& backend);

}  // namespace gpt
