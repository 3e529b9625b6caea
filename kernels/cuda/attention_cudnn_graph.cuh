// The cuDNN side of the cudnn attention path: its forward and backward operation graphs and their execution
// plans (built in attention_cudnn_graph.cu), apart from running them and caching the plans per shape
// (attention_cudnn.cu), so that each file has one job. Internal to those two files and the deviceless check
// (attention_cudnn_check.h); builds with cuDNN only (GPT_WITH_CUDNN).
#pragma once
#include "kernels/cuda/common.cuh"

#ifdef GPT_WITH_CUDNN
#include <cstdint>
#include <deque>

#include "kernels/cuda/attention_cudnn_key.h"

namespace gpt::cuda::cudnn_sdpa {

// Unique ids of the non-virtual tensors (the variant pack's keys); virtual tensors count up from kVirtual.
enum Uid : int64_t {
  kQ = 1, kK, kV, kO, kStats, kScale, kNegInf, kDO, kDQ, kDK, kDV, kOne, kDsum, kDqAccum, kVirtual = 100
};

constexpr int64_t kAlignment = 16;  // bytes, for every tensor (the frontend's; 16-byte loads on tensor cores)

// A descriptor, destroyed with its owner.
class Desc {
 public:
  explicit Desc(cudnnBackendDescriptorType_t type) { CUDNN_CHECK(cudnnBackendCreateDescriptor(type, &d_)); }
  Desc(Desc&& o) noexcept : d_(o.d_) { o.d_ = nullptr; }
  Desc(const Desc&) = delete;
  Desc& operator=(const Desc&) = delete;
  Desc& operator=(Desc&&) = delete;
  ~Desc() {
    if (d_) cudnnBackendDestroyDescriptor(d_);  // no throwing in a destructor
  }
  cudnnBackendDescriptor_t get() const { return d_; }

 private:
  cudnnBackendDescriptor_t d_ = nullptr;
};

// cudnnBackendSetAttribute with its status checked; the error names the attribute.
#define SET_ATTR(desc, attr, type, count, values) \
  CUDNN_CHECK(cudnnBackendSetAttribute((desc), (attr), (type), (count), (values)))

// cudnnBackendFinalize with its status checked.
inline void finalize(cudnnBackendDescriptor_t d) { CUDNN_CHECK(cudnnBackendFinalize(d)); }

// One execution plan and every descriptor it was built from.
struct Plan {
  std::deque<Desc> keep;
  cudnnBackendDescriptor_t plan = nullptr;
  int64_t workspace = 0;  // bytes
};

// The forward or backward plan of the graphs at layout l for the GPU of `handle`: the first engine config
// (heuristics mode A, then fallback) whose execution plan finalizes. Throws gpt::Error, with cuDNN's status
// and message, when no engine takes the graph.
Plan build_plan(cudnnHandle_t handle, bool backward, const SdpaLayout& l);

// hs = C / NH, checked.
inline int head_size(int C, int NH) {
  GPT_CHECK(NH > 0 && C % NH == 0, "cuda attention: channels ", C, " not divisible by heads ", NH);
  return C / NH;
}

}  // namespace gpt::cuda::cudnn_sdpa
#endif  // GPT_WITH_CUDNN
