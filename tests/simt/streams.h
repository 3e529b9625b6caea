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
//
// Device time. Each stream keeps a clock in emulated microseconds: an item starts when its stream has done the
// items before it and reached the points its waits name, and lasts its cost (a wait lasts nothing). Costs are a
// fixed model of a small GPU, never the emulator's own time, so device times are the same on every run and
// machine: a kernel kKernelUs, a copy or memset kCopyUs plus its bytes at kCopyBytesPerUs, a collective
// kCollectiveUs plus its bytes at kLinkBytesPerUs. An event's time is its stream's clock at the recorded point.
// So times follow stream order, whatever order the emulator happened to run the queues in, as a GPU's would
// (cudaEventElapsedTime, and the trace's device time). Work that completes later (enqueue_async: the emulated
// NCCL collectives, over nonblocking MPI) holds its stream until its poll says done; a query (event_query) runs
// a stream as far as it can without waiting for such work, so a host can poll a device whose peer rank has
// stopped.
#pragma once
#include <cuda_runtime.h>

#include <functional>

namespace simt {

using Work = std::function<void()>;
using Poll = std::function<bool()>;  // true once the work it follows is done

constexpr double kKernelUs = 3;              // a kernel launch, or a cuBLASLt product
constexpr double kCopyUs = 2;                // a copy or memset, plus its bytes at
constexpr double kCopyBytesPerUs = 20e3;     //   20 GB/s (PCIe)
constexpr double kCollectiveUs = 10;         // a collective, plus the bytes it moves per rank at
constexpr double kLinkBytesPerUs = 100e3;    //   100 GB/s (NVLink)
inline double copy_us(size_t bytes) { return kCopyUs + static_cast<double>(bytes) / kCopyBytesPerUs; }

// Queues `work` on stream s (nullptr: the legacy default stream; see above), lasting cost_us of device time.
// A stream that is not live fails with cudaErrorInvalidResourceHandle and nothing runs.
cudaError_t enqueue(cudaStream_t s, Work work, double cost_us = kKernelUs);
cudaError_t stream_create(cudaStream_t* s, bool blocking);
cudaError_t stream_destroy(cudaStream_t s);      // its queued work runs first
cudaError_t stream_synchronize(cudaStream_t s);  // runs s's queued work
cudaError_t stream_wait_event(cudaStream_t s, cudaEvent_t e);
// Queues work that completes later: `start` runs when the stream reaches it and returns the poll the stream
// then waits on. It lasts cost_us of device time.
cudaError_t enqueue_async(cudaStream_t s, std::function<Poll()> start, double cost_us);
cudaError_t event_create(cudaEvent_t* e, bool timing = true);
cudaError_t event_destroy(cudaEvent_t e);
cudaError_t event_record(cudaEvent_t e, cudaStream_t s);
cudaError_t event_synchronize(cudaEvent_t e);  // runs the recorded stream up to the record
// Runs the recorded stream towards the record without waiting for work in progress: cudaSuccess once the
// stream has passed it (or it was never recorded), else cudaErrorNotReady.
cudaError_t event_query(cudaEvent_t e);
// The device time from a's record to b's, in ms; both timing events whose streams passed their records
// (cudaErrorNotReady otherwise, cudaErrorInvalidResourceHandle for an event made with timing disabled).
cudaError_t event_elapsed(float* ms, cudaEvent_t a, cudaEvent_t b);
void device_synchronize();                     // runs every stream's queued work
// Pins phase k (k < 0: back to the drawn phases), for the emulator's own tests.
void pin_phase(int k);

}  // namespace simt
