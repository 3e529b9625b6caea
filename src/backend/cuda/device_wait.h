// The host's waits for the GPU. Each polls the point it waits for (cudaEventQuery) through the watchdog's
// wait_until (src/util/watchdog.h) instead of blocking in the driver: a collective whose peer stopped then ends
// the rank with a message naming it after --timeout, instead of hanging it, and NCCL's asynchronous errors
// are seen while the host waits. Every host synchronisation of the cuda backend goes through here.
#pragma once
#include <cuda_runtime.h>

namespace gpt::cuda {

// Whether the device has passed the record of `e` (cudaEventQuery without blocking). A "not ready" answer is
// taken back from the runtime's last error, where the runtime may leave it and the next launch's check would
// read it as that launch's failure; any other error throws.
bool event_done(cudaEvent_t e);
// Takes a "not ready" answer back from the runtime's last error (after a cudaEventQuery that returned it);
// leaves any other error where it is.
void clear_not_ready();

// Until the device has passed the record of `e`. `what` names the wait in a hang message.
void wait_event(cudaEvent_t e, const char* what);
// Until the device has run everything queued on `s` so far.
void wait_stream(cudaStream_t s, const char* what);

}  // namespace gpt::cuda
