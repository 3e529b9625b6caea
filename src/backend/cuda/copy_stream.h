// The cuda backend's copy stream: host<->device copies for offload that overlap the compute stream.
//
// Ordering is by events only. copy() records an event on the compute stream and makes the copy stream
// wait for it, so the copy starts after everything queued on compute so far (its source is written and
// its destination is no longer read); it then records the ticket's "done" event on the copy stream.
// wait_device() makes the compute stream wait for that event (the host never blocks); wait_host() holds
// the host until the copy is done (before the host reads a device-to-host result), polling the event
// (device_wait.h) so that a hang is reported, not waited out. Tickets live in a ring
// of kSlots events: for a ticket older than kSlots copies the newest copy is waited for instead (copies
// complete in issue order, so that wait covers it).
#pragma once
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <vector>

namespace gpt::cuda {

class CopyStream {
 public:
  static constexpr uint64_t kSlots = 256;

  CopyStream();
  ~CopyStream();
  CopyStream(const CopyStream&) = delete;
  CopyStream& operator=(const CopyStream&) = delete;

  // Enqueues one copy after the work queued so far on `compute`; returns its ticket (>= 1).
  uint64_t copy(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind, cudaStream_t compute);
  // Orders what is queued next on the copy stream after the work queued so far on `compute` (each copy does
  // this first; the trace's marks on this stream too).
  void follow(cudaStream_t compute);
  void wait_device(uint64_t ticket, cudaStream_t compute);  // compute waits for the copy (no host block)
  void wait_host(uint64_t ticket);                          // the host waits for the copy
  void synchronize();                                       // the host waits for every copy
  cudaStream_t stream() const { return stream_; }

 private:
  cudaEvent_t slot(uint64_t ticket, const char* what) const;

  cudaStream_t stream_ = nullptr;
  cudaEvent_t compute_ready_ = nullptr;  // re-recorded per copy; each wait binds to its latest record
  std::vector<cudaEvent_t> done_;        // (kSlots) the "done" event of ticket t is done_[t % kSlots]
  uint64_t next_ = 1;                    // the next ticket
};

}  // namespace gpt::cuda
