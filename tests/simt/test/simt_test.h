// Helpers for the emulator's own tests (compiled like the emulated CUDA sources: simt.h force-included).
#pragma once
#include <string>
#include <vector>

#include "src/core/check.h"
#include "src/core/cuda_check.h"
#include "tests/common/error_of.h"

namespace gpt::cuda {

using test::error_of;  // the error text of what a launch or a synchronisation does

// `count` floats of device memory, freed at the end of the test.
struct DeviceFloats {
  float* p = nullptr;
  size_t n;
  explicit DeviceFloats(size_t count) : n(count) { CUDA_CHECK(cudaMalloc(&p, n * sizeof(float))); }
  ~DeviceFloats() { cudaFree(p); }
  DeviceFloats(const DeviceFloats&) = delete;
  DeviceFloats& operator=(const DeviceFloats&) = delete;
  std::vector<float> host() const {  // through the legacy default stream: after every blocking stream's work
    std::vector<float> h(n);
    CUDA_CHECK(cudaMemcpy(h.data(), p, n * sizeof(float), cudaMemcpyDeviceToHost));
    return h;
  }
};

}  // namespace gpt::cuda
