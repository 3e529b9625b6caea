// See stream_clock.h.
#include "src/backend/cuda/stream_clock.h"

#include <chrono>
#include <map>
#include <mutex>

#include "src/backend/cuda/device_wait.h"
#include "src/core/check.h"
#include "src/core/cuda_check.h"

namespace gpt::cuda {
namespace {

struct Anchor {
  cudaEvent_t event = nullptr;  // (timing) recorded once, on the first clock's stream
  double host_us = 0;           // the host's monotonic clock when the host saw it pass
};

// The current device's anchor, made on first use (never destroyed: clocks of any lifetime read it).
const Anchor& anchor(cudaStream_t stream) {
  static std::mutex mu;
  static std::map<int, Anchor> by_device;
  std::lock_guard<std::mutex> lock(mu);
  int device = 0;
  CUDA_CHECK(cudaGetDevice(&device));
  auto it = by_device.find(device);
  if (it != by_device.end()) return it->second;
  Anchor a;
  CUDA_CHECK(cudaEventCreate(&a.event));
  CUDA_CHECK(cudaEventRecord(a.event, stream));
  wait_event(a.event, "the trace's clock anchor");
  using namespace std::chrono;
  a.host_us = duration<double, std::micro>(steady_clock::now().time_since_epoch()).count();
  return by_device[device] = a;
}

}  // namespace

// A base this far back (ms) is replaced by the mark being read: a float keeps its steps under 0.1 us there.
constexpr float kRebaseMs = 1000.0f;

EventClock::EventClock(cudaStream_t stream, std::function<void()> before_mark)
    : stream_(stream), before_mark_(std::move(before_mark)) {
  const Anchor& a = anchor(stream_);
  base_ = a.event;
  base_us_ = a.host_us;
}

EventClock::~EventClock() {
  trace::unbind_clock(this);
  for (cudaEvent_t e : events_) cudaEventDestroy(e);  // no throwing in a destructor
}

uint64_t EventClock::mark() {
  uint64_t m = 0;
  if (!free_.empty()) {
    m = free_.back();
    free_.pop_back();
  } else {
    cudaEvent_t e = nullptr;
    CUDA_CHECK(cudaEventCreate(&e));
    events_.push_back(e);
    m = events_.size();
  }
  if (before_mark_) before_mark_();
  CUDA_CHECK(cudaEventRecord(events_[m - 1], stream_));
  return m;
}

double EventClock::take_time_us(uint64_t m) {
  GPT_CHECK(m >= 1 && m <= events_.size(), "trace: mark ", m, " was not made by this stream's clock");
  cudaEvent_t e = events_[m - 1];
  if (!event_done(e)) return -1;
  float ms = 0;
  CUDA_CHECK(cudaEventElapsedTime(&ms, base_, e));
  const double t = base_us_ + 1000.0 * ms;
  if (ms < kRebaseMs) {
    free_.push_back(m);
  } else {  // m becomes the base; the old base's event (one of ours) is free again
    if (base_mark_) free_.push_back(base_mark_);
    base_ = e, base_mark_ = m, base_us_ = t;
  }
  return t;
}

}  // namespace gpt::cuda
