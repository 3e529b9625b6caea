// See copy_stream.h.
#include "src/backend/cuda/copy_stream.h"

#include "src/backend/cuda/device_wait.h"

#include "src/core/check.h"
#include "src/core/cuda_check.h"

namespace gpt::cuda {

CopyStream::CopyStream() : done_(kSlots, nullptr) {
  // Lower priority than compute is the default; copies only need to progress, not to preempt.
  CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  CUDA_CHECK(cudaEventCreateWithFlags(&compute_ready_, cudaEventDisableTiming));
  for (auto& e : done_) CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
}

CopyStream::~CopyStream() {  // no throwing in a destructor: errors here are ignored
  if (stream_) cudaStreamSynchronize(stream_);
  for (auto e : done_)
    if (e) cudaEventDestroy(e);
  if (compute_ready_) cudaEventDestroy(compute_ready_);
  if (stream_) cudaStreamDestroy(stream_);
}

uint64_t CopyStream::copy(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind, cudaStream_t compute) {
  const uint64_t t = next_++;
  follow(compute);
  if (bytes) CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, kind, stream_));
  CUDA_CHECK(cudaEventRecord(done_[t % kSlots], stream_));
  return t;
}

void CopyStream::follow(cudaStream_t compute) {
  CUDA_CHECK(cudaEventRecord(compute_ready_, compute));
  CUDA_CHECK(cudaStreamWaitEvent(stream_, compute_ready_, 0));
}

// A ticket older than the ring has had its event reused by a later copy; the stream runs copies in order,
// so waiting for the newest copy instead is a correct (conservative) wait for it.
cudaEvent_t CopyStream::slot(uint64_t ticket, const char* what) const {
  GPT_CHECK(ticket >= 1 && ticket < next_, what, ": copy ticket ", ticket, " was never issued");
  if (next_ - ticket > kSlots) return done_[(next_ - 1) % kSlots];
  return done_[ticket % kSlots];
}

void CopyStream::wait_device(uint64_t ticket, cudaStream_t compute) {
  CUDA_CHECK(cudaStreamWaitEvent(compute, slot(ticket, "wait_copy_device"), 0));
}

void CopyStream::wait_host(uint64_t ticket) { wait_event(slot(ticket, "wait_copy_host"), "an offload copy"); }

void CopyStream::synchronize() { wait_stream(stream_, "the copy stream"); }

}  // namespace gpt::cuda
