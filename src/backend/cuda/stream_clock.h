// Device time for the trace (src/util/trace.h): a trace::StreamClock over one CUDA stream. A mark is a timing
// event recorded on the stream; its time is cudaEventElapsedTime from the device's anchor, one event recorded
// at the first clock's construction and waited for by the host, which took its own time then. So every stream
// of a device shares one time base, set on the host's clock to within that one wait (a few microseconds).
// Events are pooled: a mark's event is reused once its time was taken. cudaEventElapsedTime's float
// milliseconds round to about 6e-8 of the span they measure (0.25 ms an hour after the anchor), so each clock
// measures from its own latest base instead: a mark read at least a second after the base becomes the new base,
// its time (a double) carried on. Marks are read in stream order (trace::resolve), so every later mark was
// recorded after the base, and a span stays exact to the microsecond however long the trace.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>
#include <functional>
#include <vector>

#include "src/util/trace.h"

namespace gpt::cuda {

class EventClock final : public trace::StreamClock {
 public:
  // `before_mark` runs before each mark is recorded: the copy stream orders its marks after the compute
  // stream's work queued so far, as it orders its copies, so a span of a copy starts when the copy can.
  explicit EventClock(cudaStream_t stream, std::function<void()> before_mark = {});
  ~EventClock() override;  // unbinds itself from the trace's tracks
  EventClock(const EventClock&) = delete;
  EventClock& operator=(const EventClock&) = delete;

  uint64_t mark() override;
  double take_time_us(uint64_t mark) override;

 private:
  cudaStream_t stream_;
  std::function<void()> before_mark_;
  std::vector<cudaEvent_t> events_;  // every event made; mark m is events_[m - 1]
  std::vector<uint64_t> free_;       // marks whose time was taken: their events are free (not the base's)
  cudaEvent_t base_ = nullptr;       // what marks are measured from: the device's anchor, then a mark of ours
  uint64_t base_mark_ = 0;           // that mark (0: the anchor)
  double base_us_ = 0;               // its time on the host's clock
};

}  // namespace gpt::cuda
