// See device_wait.h.
#include "src/backend/cuda/device_wait.h"

#include "src/core/cuda_check.h"
#include "src/util/watchdog.h"

namespace gpt::cuda {

void wait_event(cudaEvent_t e, const char* what) {
  watchdog::wait_until(what, [e] {
    const cudaError_t q = cudaEventQuery(e);
    if (q == cudaErrorNotReady) return false;
    CUDA_CHECK(q);
    return true;
  });
}

void wait_stream(cudaStream_t s, const char* what) {
  struct Event {
    cudaEvent_t e = nullptr;
    Event() { CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming)); }
    ~Event() { cudaEventDestroy(e); }
  } done;
  CUDA_CHECK(cudaEventRecord(done.e, s));
  wait_event(done.e, what);
}

}  // namespace gpt::cuda
