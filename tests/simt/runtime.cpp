// The CUDA runtime calls the project makes, on the CPU, for the SIMT emulator build (the program links this
// instead of libcudart). One device (sm_90 limits, kDeviceBytes of memory); streams and events are queues and
// marks in them (streams.h: work runs as late as CUDA allows). Device memory is host memory handed out and
// tracked here: it starts as NaN bytes, and a copy or memset must stay inside one live block, as a GPU
// requires. Copies keep CUDA's host-side rules: an async copy to or from pinned memory (cudaMallocHost)
// runs with its stream; from pageable memory its source is staged when the call is made and copied with the
// stream; to pageable memory the call returns once the copy is done (what CUDA does for pageable memory).
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "tests/simt/state.h"
#include "tests/simt/streams.h"

namespace simt {

State& state() {
  static State s;
  return s;
}

void State::set_error(cudaError_t e, std::string text) {
  std::lock_guard<std::mutex> lock(mu_);
  if (sticky_) return;  // a GPU after a sticky fault: every call reports that fault
  last_ = e;
  text_of_ = e;
  text_ = std::move(text);
}
void State::set_fault(cudaError_t e, std::string text, bool sticky) {
  std::lock_guard<std::mutex> lock(mu_);
  if (sticky_) return;  // the first sticky fault is what every call returns from then on
  last_ = fault_ = text_of_ = e;
  text_ = std::move(text);
  sticky_ = sticky;
}
cudaError_t State::take_error() {
  std::lock_guard<std::mutex> lock(mu_);
  const cudaError_t e = last_;
  if (!sticky_) last_ = fault_ = cudaSuccess;
  return e;
}
cudaError_t State::fault() {
  std::lock_guard<std::mutex> lock(mu_);
  return fault_;
}
cudaError_t State::peek_error() {
  std::lock_guard<std::mutex> lock(mu_);
  return last_;
}
const char* State::text(cudaError_t e) {
  std::lock_guard<std::mutex> lock(mu_);
  if (e == text_of_ && !text_.empty()) return text_.c_str();
  return e == cudaSuccess ? "no error" : "error in the SIMT emulator";
}

size_t State::max_dynamic_shared(const void* kernel) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = shared_optin_.find(kernel);
  return it == shared_optin_.end() ? 0 : it->second;
}
void State::set_max_dynamic_shared(const void* kernel, size_t bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  shared_optin_[kernel] = bytes;
}

cudaError_t State::alloc(void** p, size_t bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  const size_t rounded = (bytes + kAllocRounding - 1) / kAllocRounding * kAllocRounding;
  if (bytes == 0) {  // as cudaMalloc: success, and no block
    *p = nullptr;
    return cudaSuccess;
  }
  if (used_ + rounded > kDeviceBytes) return cudaErrorMemoryAllocation;
  void* q = nullptr;  // exactly the bytes asked for: under AddressSanitizer a kernel's overrun stops the test
  if (posix_memalign(&q, 256, bytes) != 0) return cudaErrorMemoryAllocation;
  std::memset(q, 0xFF, bytes);  // NaN in fp32 and bf16: a read before any write shows
  blocks_[static_cast<const char*>(q)] = {bytes, rounded};
  used_ += rounded;
  *p = q;
  return cudaSuccess;
}
cudaError_t State::free(void* p) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!p) return cudaSuccess;
  auto it = blocks_.find(static_cast<const char*>(p));
  if (it == blocks_.end()) return cudaErrorInvalidValue;
  used_ -= it->second.rounded;
  blocks_.erase(it);
  std::free(p);
  return cudaSuccess;
}
size_t State::used() {
  std::lock_guard<std::mutex> lock(mu_);
  return used_;
}
bool State::within(const Blocks& blocks, const void* p, size_t bytes) {
  const char* c = static_cast<const char*>(p);
  auto it = blocks.upper_bound(c);
  if (it == blocks.begin()) return false;
  --it;
  return c >= it->first && c + bytes <= it->first + it->second.asked;
}
bool State::inside(const void* p, size_t bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  return within(blocks_, p, bytes);
}

void State::pin(const void* p, size_t bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  pinned_[static_cast<const char*>(p)] = {bytes, bytes};
}
bool State::unpin(const void* p) {
  std::lock_guard<std::mutex> lock(mu_);
  return pinned_.erase(static_cast<const char*>(p)) == 1;
}
bool State::pinned(const void* p, size_t bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  return within(pinned_, p, bytes);
}

}  // namespace simt

namespace {

cudaError_t fail(cudaError_t e, const std::string& what) {
  simt::state().set_error(e, "SIMT emulator: " + what);
  return e;
}

// Host memory for the host side of a copy: anything that is not device memory.
cudaError_t validate_copy(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind) {
  if (bytes == 0) return cudaSuccess;
  if (!dst || !src) return fail(cudaErrorInvalidValue, "cudaMemcpy with a null pointer");
  const bool dst_dev = kind == cudaMemcpyHostToDevice || kind == cudaMemcpyDeviceToDevice;
  const bool src_dev = kind == cudaMemcpyDeviceToHost || kind == cudaMemcpyDeviceToDevice;
  if (dst_dev && !simt::state().inside(dst, bytes))
    return fail(cudaErrorIllegalAddress,
                "cudaMemcpy writes " + std::to_string(bytes) + " bytes outside any device allocation");
  if (src_dev && !simt::state().inside(src, bytes))
    return fail(cudaErrorIllegalAddress,
                "cudaMemcpy reads " + std::to_string(bytes) + " bytes outside any device allocation");
  if (kind != cudaMemcpyHostToDevice && kind != cudaMemcpyDeviceToHost && kind != cudaMemcpyDeviceToDevice &&
      kind != cudaMemcpyHostToHost)
    return fail(cudaErrorInvalidMemcpyDirection, "cudaMemcpy kind not emulated");
  return cudaSuccess;
}

// What a synchronising call returns: its own failure, or the fault of device work that ran (State::set_fault).
cudaError_t after_sync(cudaError_t e) { return e != cudaSuccess ? e : simt::state().fault(); }

}  // namespace

cudaError_t cudaGetLastError() { return simt::state().take_error(); }
cudaError_t cudaPeekAtLastError() { return simt::state().peek_error(); }
const char* cudaGetErrorName(cudaError_t e) {
  switch (e) {
    case cudaSuccess:
      return "cudaSuccess";
    case cudaErrorMemoryAllocation:
      return "cudaErrorMemoryAllocation";
    case cudaErrorInvalidValue:
      return "cudaErrorInvalidValue";
    case cudaErrorIllegalAddress:
      return "cudaErrorIllegalAddress";
    case cudaErrorNotReady:
      return "cudaErrorNotReady";
    case cudaErrorLaunchFailure:
      return "cudaErrorLaunchFailure";
    case cudaErrorInvalidConfiguration:
      return "cudaErrorInvalidConfiguration";
    case cudaErrorInvalidDevice:
      return "cudaErrorInvalidDevice";
    default:
      return "cudaError (SIMT emulator)";
  }
}
const char* cudaGetErrorString(cudaError_t e) { return simt::state().text(e); }

namespace {
// GPT_SIMT_DEVICES=N (1..64, default 1): how many GPUs the emulated machine shows, so that N ranks under
// mpiexec each find one of their own. Each process emulates its devices in its own memory.
int device_count() {
  static const int n = [] {
    const char* v = std::getenv("GPT_SIMT_DEVICES");
    if (!v) return 1;
    char* end = nullptr;
    const long k = std::strtol(v, &end, 10);
    if (end == v || *end != '\0' || k < 1 || k > 64) {
      std::fprintf(stderr, "error: GPT_SIMT_DEVICES=%s: expected a device count from 1 to 64\n", v);
      std::exit(2);
    }
    return static_cast<int>(k);
  }();
  return n;
}
int g_device = 0;
bool valid_device(int device) { return device >= 0 && device < device_count(); }
}  // namespace

cudaError_t cudaGetDeviceCount(int* count) {
  *count = device_count();
  return cudaSuccess;
}
cudaError_t cudaSetDevice(int device) {
  if (!valid_device(device)) return fail(cudaErrorInvalidDevice, "device " + std::to_string(device));
  g_device = device;
  return cudaSuccess;
}
cudaError_t cudaGetDevice(int* device) {
  *device = g_device;
  return cudaSuccess;
}
cudaError_t cudaDeviceSynchronize() {
  simt::device_synchronize();
  return after_sync(cudaSuccess);
}

cudaError_t cudaDeviceGetAttribute(int* value, cudaDeviceAttr attr, int device) {
  if (!valid_device(device)) return fail(cudaErrorInvalidDevice, "device " + std::to_string(device));
  switch (attr) {
    case cudaDevAttrComputeCapabilityMajor:
      *value = 9;
      return cudaSuccess;
    case cudaDevAttrComputeCapabilityMinor:
      *value = 0;
      return cudaSuccess;
    case cudaDevAttrMultiProcessorCount:
      *value = 132;
      return cudaSuccess;
    case cudaDevAttrClockRate:
      *value = 1980000;
      return cudaSuccess;
    case cudaDevAttrMaxSharedMemoryPerBlockOptin:
      *value = static_cast<int>(simt::kSharedOptinBytes);
      return cudaSuccess;
    case cudaDevAttrWarpSize:
      *value = 32;
      return cudaSuccess;
    default:
      return fail(cudaErrorInvalidValue, "device attribute " + std::to_string(attr) + " not emulated");
  }
}

cudaError_t cudaGetDeviceProperties(cudaDeviceProp* prop, int device) {
  if (!valid_device(device)) return fail(cudaErrorInvalidDevice, "device " + std::to_string(device));
  *prop = cudaDeviceProp{};
  std::strncpy(prop->name, "SIMT emulator (CPU)", sizeof prop->name - 1);
  prop->major = 9;
  prop->minor = 0;
  prop->totalGlobalMem = simt::kDeviceBytes;
  prop->multiProcessorCount = 132;
  prop->warpSize = 32;
  prop->sharedMemPerBlockOptin = simt::kSharedOptinBytes;
  prop->maxThreadsPerBlock = 1024;
  return cudaSuccess;
}

cudaError_t cudaFuncSetAttribute(const void* func, cudaFuncAttribute attr, int value) {
  if (attr != cudaFuncAttributeMaxDynamicSharedMemorySize)
    return fail(cudaErrorInvalidValue, "function attribute " + std::to_string(attr) + " not emulated");
  if (value < 0 || static_cast<size_t>(value) > simt::kSharedOptinBytes)
    return fail(cudaErrorInvalidValue, "cudaFuncSetAttribute: " + std::to_string(value) +
                                           " bytes of dynamic shared memory exceed the device's opt-in limit");
  simt::state().set_max_dynamic_shared(func, static_cast<size_t>(value));
  return cudaSuccess;
}

cudaError_t cudaMalloc(void** p, size_t bytes) {
  const cudaError_t e = simt::state().alloc(p, bytes);
  return e == cudaSuccess ? e : fail(e, "cudaMalloc of " + std::to_string(bytes) + " bytes");
}
cudaError_t cudaFree(void* p) {
  simt::device_synchronize();  // as on a GPU: cudaFree waits for the device, so no queued work outlives p
  const cudaError_t e = simt::state().free(p);
  return e == cudaSuccess ? after_sync(e) : fail(e, "cudaFree of a pointer cudaMalloc did not return");
}
cudaError_t cudaMallocHost(void** p, size_t bytes) {
  if (posix_memalign(p, 256, bytes) != 0)
    return fail(cudaErrorMemoryAllocation, "cudaMallocHost of " + std::to_string(bytes) + " bytes");
  std::memset(*p, 0xFF, bytes);
  simt::state().pin(*p, bytes);
  return cudaSuccess;
}
cudaError_t cudaFreeHost(void* p) {
  simt::device_synchronize();
  if (!p) return cudaSuccess;
  if (!simt::state().unpin(p))
    return fail(cudaErrorInvalidValue, "cudaFreeHost of a pointer cudaMallocHost did not return");
  std::free(p);
  return cudaSuccess;
}
cudaError_t cudaMemGetInfo(size_t* free_bytes, size_t* total_bytes) {
  *total_bytes = simt::kDeviceBytes;
  *free_bytes = simt::kDeviceBytes - simt::state().used();
  return cudaSuccess;
}

cudaError_t cudaMemcpy(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind) {
  const cudaError_t e = validate_copy(dst, src, bytes, kind);
  if (e != cudaSuccess || bytes == 0) return e;
  return after_sync(simt::enqueue(nullptr, [=] { std::memmove(dst, src, bytes); }, simt::copy_us(bytes)));  // legacy
}
cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind, cudaStream_t s) {
  const cudaError_t e = validate_copy(dst, src, bytes, kind);
  if (e != cudaSuccess || bytes == 0) return e;
  // Host to host, or to pageable memory: done when the call returns.
  if (kind == cudaMemcpyHostToHost || (kind == cudaMemcpyDeviceToHost && !simt::state().pinned(dst, bytes))) {
    const cudaError_t sync = after_sync(simt::stream_synchronize(s));
    if (sync != cudaSuccess) return sync;
    std::memmove(dst, src, bytes);
    return cudaSuccess;
  }
  if (kind == cudaMemcpyHostToDevice && !simt::state().pinned(src, bytes)) {  // staged now, copied later
    auto staged =  // (bytes) the pageable source as it was at the call
        std::make_shared<std::vector<char>>(static_cast<const char*>(src), static_cast<const char*>(src) + bytes);
    return simt::enqueue(s, [=] { std::memcpy(dst, staged->data(), bytes); }, simt::copy_us(bytes));
  }
  return simt::enqueue(s, [=] { std::memmove(dst, src, bytes); }, simt::copy_us(bytes));
}
cudaError_t cudaMemsetAsync(void* p, int value, size_t bytes, cudaStream_t s) {
  if (bytes == 0) return cudaSuccess;
  if (!simt::state().inside(p, bytes))
    return fail(cudaErrorIllegalAddress,
                "cudaMemset of " + std::to_string(bytes) + " bytes outside any device allocation");
  return simt::enqueue(s, [=] { std::memset(p, value, bytes); }, simt::copy_us(bytes));
}
cudaError_t cudaMemset(void* p, int value, size_t bytes) { return cudaMemsetAsync(p, value, bytes, nullptr); }

cudaError_t cudaStreamCreate(cudaStream_t* s) { return simt::stream_create(s, true); }
cudaError_t cudaStreamCreateWithFlags(cudaStream_t* s, unsigned int flags) {
  return simt::stream_create(s, !(flags & cudaStreamNonBlocking));
}
cudaError_t cudaStreamCreateWithPriority(cudaStream_t* s, unsigned int flags, int) {
  return simt::stream_create(s, !(flags & cudaStreamNonBlocking));
}
cudaError_t cudaStreamDestroy(cudaStream_t s) { return simt::stream_destroy(s); }
cudaError_t cudaStreamSynchronize(cudaStream_t s) { return after_sync(simt::stream_synchronize(s)); }
cudaError_t cudaStreamWaitEvent(cudaStream_t s, cudaEvent_t e, unsigned int) { return simt::stream_wait_event(s, e); }
cudaError_t cudaEventCreateWithFlags(cudaEvent_t* e, unsigned int flags) {
  return simt::event_create(e, !(flags & cudaEventDisableTiming));
}
cudaError_t cudaEventCreate(cudaEvent_t* e) { return simt::event_create(e); }
cudaError_t cudaEventDestroy(cudaEvent_t e) { return simt::event_destroy(e); }
cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s) { return simt::event_record(e, s); }
cudaError_t cudaEventSynchronize(cudaEvent_t e) { return after_sync(simt::event_synchronize(e)); }
// "Not ready" is also left as the last error, as the CUDA runtime may leave it (PyTorch clears it after each
// query that returns it): a program that does not clear it then fails its next launch check here.
cudaError_t cudaEventQuery(cudaEvent_t e) {
  const cudaError_t q = simt::event_query(e);
  if (q == cudaErrorNotReady) simt::state().set_error(q, "cudaEventQuery: the event's work has not run yet");
  return q == cudaSuccess ? after_sync(q) : q;
}
cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t start, cudaEvent_t end) {
  return simt::event_elapsed(ms, start, end);
}
cudaError_t cudaDeviceGetStreamPriorityRange(int* least, int* greatest) {
  if (least) *least = 0;
  if (greatest) *greatest = -5;
  return cudaSuccess;
}
