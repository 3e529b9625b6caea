// See device_wait.h.
#include "src/backend/cuda/device_wait.h"

#include "src/core/cuda_check.h"
#include "src/util/watchdog.h"

namespace gpt::cuda {

void clear_not_ready() {
  if (cudaPeekAtLastError() == cudaErrorNotReady) (void)cudaGetLastError();
}

bool event_done(cudaEvent_t e) {
  const cudaError_t q = cudaEventQuery(e);
  if (q == cudaErrorNotReady) {
    clear_not_ready();
    return false;
  }
  if (q != cudaSuccess) detail::cuda_fail(q, "cudaEventQuery", __FILE__, __LINE__);
  return true;
}

void wait_event(cudaEvent_t e, const char* what) {
  watchdog::wait_until(what, [e] { return event_done(e); });
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
