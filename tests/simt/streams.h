// Streams and events for the SIMT emulator (runtime.cpp, executor.cpp, cublaslt.cpp). Why: a GPU runs a
// stream's work after the call that queued it returns, and two streams' work in any order their events allow.
// If the emulator ran every kernel and copy when it was issued, a missing event wait (a kernel reading what
// the copy stream has not copied yet, a host reading pinned memory before its copy ended) would pass here
// and fail on a GPU. So work on a created stream is queued, and runs when something needs it done:
//   - cudaStreamSynchronize / cudaEventSynchronize run that stream up to that point (and what it waits for);
//   - a cudaStreamWaitEvent inside a queue runs the other stream up to the event's record first;
//   - the legacy default stream (nullptr) first finishes every blocking stream's queued work, then runs its
//     own work at once (CUDA's implicit synchronisation; non-blocking streams are not waited for);
//   - cudaDeviceSynchronize, cudaFree and cudaFreeHost finish every stream, in an order that alternates
//     between calls (first created first, then last created first).
// Or at once: the time between two host synchronisations is a phase. Phase 0 runs every stream lazily;
// phase k >= 1 runs the k-th live stream (in creation order) as soon as its work is queued, the others
// lazily. So each side of a hazard can run first: with the compute stream eager and the copy stream lazy, a
// kernel that does not wait for its upload reads stale data; with everything lazy, a host that reads a
// pinned result without waiting reads the old bytes.
// GPT_SIMT_STREAMS picks the schedule: "phases" (the default) draws each phase from a hash of the count of
// host synchronisations, so no pattern in a program's synchronisations meets the same phase every time;
// "lazy" and "eager:K" pin phase 0 or K for the whole run, so a test can run each in turn; "issue" runs all
// work when it is queued, in call order: a schedule that is right by construction, so a run's results under
// the others can be compared with it bit for bit.
// One host thread drives the emulated device; the queues are guarded for safety, not for concurrency.
#pragma once
#include <cuda_runtime.h>

#include <functional>

namespace simt {

using Work = std::function<void()>;

// Queues `work` on stream s (nullptr: the legacy default stream; see above). A stream that is not live fails
// with cudaErrorInvalidResourceHandle and nothing runs.
cudaError_t enqueue(cudaStream_t s, Work work);
cudaError_t stream_create(cudaStream_t* s, bool blocking);
cudaError_t stream_destroy(cudaStream_t s);      // its queued work runs first
cudaError_t stream_synchronize(cudaStream_t s);  // runs s's queued work
cudaError_t stream_wait_event(cudaStream_t s, cudaEvent_t e);
cudaError_t event_create(cudaEvent_t* e);
cudaError_t event_destroy(cudaEvent_t e);
cudaError_t event_record(cudaEvent_t e, cudaStream_t s);
cudaError_t event_synchronize(cudaEvent_t e);  // runs the recorded stream up to the record
void device_synchronize();                     // runs every stream's queued work
// Pins phase k (k < 0: back to the drawn phases), for the emulator's own tests.
void pin_phase(int k);

}  // namespace simt
