// The SIMT emulator's device state (runtime.cpp, executor.cpp): the last error and its text, the kernels'
// shared-memory opt-ins and the emulated device memory: every block the program holds, so a copy or memset
// that strays outside one fails like a GPU's illegal address instead of touching host memory silently.
#pragma once
#include <cuda_runtime.h>

#include <cstddef>
#include <map>
#include <mutex>
#include <string>

namespace simt {

constexpr size_t kDeviceBytes = size_t{16} << 30;  // the emulated device's memory
constexpr size_t kSharedOptinBytes = 232448;       // most dynamic shared memory per block (sm_90)
constexpr size_t kAllocRounding = 512;             // what cudaMalloc rounds a block up to here

class State {
 public:
  void set_error(cudaError_t e, std::string text);
  // A fault of running device work (a kernel's): the last error, and also what every synchronising call
  // returns until cudaGetLastError takes it (a GPU's faults stay for good; here a test may go on after one
  // the emulator found). A sticky fault stays, as a GPU's does: nothing takes it (GPT_SIMT_FAULT_AT).
  void set_fault(cudaError_t e, std::string text, bool sticky = false);
  cudaError_t take_error();  // cudaGetLastError: returns the last error and clears it (and a fault not sticky)
  cudaError_t peek_error();
  cudaError_t fault();
  const char* text(cudaError_t e);  // the last error's own text, for that error

  size_t max_dynamic_shared(const void* kernel);
  void set_max_dynamic_shared(const void* kernel, size_t bytes);

  // Device memory: blocks filled with NaN bytes (device memory starts undefined), counted rounded up.
  cudaError_t alloc(void** p, size_t bytes);
  cudaError_t free(void* p);
  size_t used();
  // Whether [p, p + bytes) lies inside the bytes one live block was asked for.
  bool inside(const void* p, size_t bytes);

  // Pinned host memory (cudaMallocHost): async copies to and from it run with their stream.
  void pin(const void* p, size_t bytes);
  bool unpin(const void* p);                 // false: p is not the start of a pinned block
  bool pinned(const void* p, size_t bytes);  // [p, p + bytes) inside one pinned block

 private:
  std::mutex mu_;
  cudaError_t last_ = cudaSuccess;
  cudaError_t fault_ = cudaSuccess;
  bool sticky_ = false;
  cudaError_t text_of_ = cudaSuccess;  // the error text_ describes
  std::string text_;
  std::map<const void*, size_t> shared_optin_;
  struct Block {
    size_t asked, rounded;
  };
  using Blocks = std::map<const char*, Block>;  // by start
  static bool within(const Blocks& blocks, const void* p, size_t bytes);
  Blocks blocks_;
  Blocks pinned_;  // pinned host blocks
  size_t used_ = 0;
};
State& state();

}  // namespace simt
