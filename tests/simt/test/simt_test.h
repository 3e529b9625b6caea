// Helpers for the emulator's own tests (compiled like the emulated CUDA sources: simt.h force-included).
#pragma once
#include <string>
#include <vector>

#include "src/core/check.h"
#include "src/core/cuda_check.h"

namespace gpt::cuda {

// The error text of what `launch` does (a launch, a synchronisation), or "" when it succeeded.
template <typename Launch>
std::string launch_error(Launch&& launch) {
  try {
    launch();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

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
