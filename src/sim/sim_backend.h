// The simulated machine's backend: the Backend interface with no memory behind it and no byte touched. Every
// allocation is recorded in the memory ledger exactly as the backend it stands for records it (the cpu
// backend, or the cuda backend with its cuBLASLt workspace and op scratch), at an address nothing may
// dereference; every op, conversion and copy is priced (src/plan/op_costs.h at src/plan/rank_rates.h's rates)
// and placed on the timeline (src/sim/timeline.h) where the real backend would run it. Values read back to
// the host (losses, norms) come back as 0: nothing in the model or the engine may branch on them.
//
// Phases: an op's kind says what it is (forward ops, *_backward ops, the engine's memory work, the
// optimizer's); a forward op issued after a backward op of the same micro-step is a recompute.
// Per-unit time: SimBackend::set_unit names the unit whose ops follow (src/sim/observed_params.h).
#pragma once
#include <array>
#include <memory>
#include <optional>
#include <vector>

#include "kernels/sizes.h"
#include "src/backend/backend.h"
#include "src/plan/rank_rates.h"
#include "src/sim/timeline.h"

namespace gpt::sim {

struct SimDevice {
  DeviceKind kind = DeviceKind::cpu;  // the backend simulated: cpu (fp32) or cuda (bf16)
  AttentionPath attention = AttentionPath::simple;
  cuda::CudnnPlanWorkspace cudnn_workspace;  // the cudnn path's plans (counted as memplan counts them)
};

// The simulated device's peak: the hardware file's (0 for a memory-only plan).
class SimDeviceInfo : public DeviceInfo {
 public:
  explicit SimDeviceInfo(const RankRates* rates) : rates_(rates) {}
  PeakFlops peak_flops() const override { return {rates_ ? rates_->peak : 0, "the hardware file"}; }

 private:
  const RankRates* rates_;
};

class SimBackend : public Backend {
 public:
  // rates: null prices every op at 0 (a memory-only plan).
  SimBackend(const SimDevice& dev, Timeline& tl, const RankRates* rates);
  ~SimBackend() override;
  std::string name() const override { return host_of_ ? "sim host" : kind_ == DeviceKind::cpu ? "sim cpu" : "sim cuda"; }
  // The host side is cpu kernels on host memory, as make_host_backend's is.
  DeviceKind kind() const override { return host_of_ ? DeviceKind::cpu : kind_; }
  DType compute_dtype() const override { return kind() == DeviceKind::cpu ? DType::F32 : DType::BF16; }
  MemoryLedger& ledger() override { return host_of_ ? host_of_->ledger() : Backend::ledger(); }
  void* alloc(size_t bytes, MemCat cat) override;
  void free(void* p) override;
  void* alloc_host(size_t bytes, MemCat cat) override;
  void free_host(void* p) override;
  DeviceInfo& device_info() const override { return info_; }
  void reserve_workspace(int B, int T, int C, int NH, int max_bias_oc, int tp) override;
  std::unique_ptr<Backend> host_side() override;
  void host_write(void*, const void*, size_t) override {}

  void zero(void* p, size_t bytes) override;
  void copy_d2d(void* dst, const void* src, size_t bytes) override;
  void copy_h2d(void* dst, const void* src, size_t bytes) override;
  void copy_d2h(void* dst, const void* src, size_t bytes) override;
  void synchronize() override { tl_.synchronize(); }
  uint64_t copy_h2d_async(void* dst, const void* src, size_t bytes) override;
  uint64_t copy_d2h_async(void* dst, const void* src, size_t bytes) override;
  void wait_copy_device(uint64_t t) override { tl_.compute_waits(tl_.copy_end(t), Phase::copies); }
  void wait_copy_host(uint64_t t) override { tl_.host_waits(tl_.copy_end(t), Phase::copies); }
  void f32_to_compute(void* dst, const float* src, size_t n) override;
  void compute_to_f32(float* dst, const void* src, size_t n) override;
  void f32_to_bf16(void* dst, const float* src, size_t n) override;
  void bf16_to_f32(float* dst, const void* src, size_t n) override;

  void encoder_forward(void*, const int*, const void*, const void*, int B, int T, int C) override;
  void encoder_backward(float*, float*, const void*, const int*, int B, int T, int C) override;
  void layernorm_forward(void*, float*, float*, const void*, const void*, const void*, int N, int C) override;
  void layernorm_backward(void*, float*, float*, const void*, const void*, const void*, const float*, const float*,
                          int N, int C) override;
  void residual_layernorm_forward(void*, void*, float*, float*, const void*, const void*, const void*, const void*,
                                  int N, int C) override;
  void layernorm_backward_residual(void*, float*, float*, const void*, const void*, const void*, const float*,
                                   const float*, int N, int C) override;
  void matmul_forward(void*, const void*, const void*, const void*, int N, int C, int OC) override;
  void matmul_gelu_forward(void*, void*, const void*, const void*, const void*, int N, int C, int OC) override;
  void matmul_backward(void*, float*, float* dbias, const void*, const void*, const void*, int N, int C,
                       int OC) override;
  void gelu_matmul_backward(void*, float*, float* dbias, const void*, const void*, const void*, const void*, int N,
                            int C, int OC) override;
  void set_attention_path(AttentionPath path, bool automatic = false) override;
  AttentionPath attention_path() const override { return attention_; }
  size_t attention_state_bytes(int B, int T, int NH) const override;
  void attention_forward(void*, void*, const void*, int B, int T, int C, int NH) override;
  void attention_backward(void*, const void*, const void*, const void*, const void*, int B, int T, int C,
                          int NH) override;
  void attention_cached_forward(void*, void*, void*, const void*, int B, int Tn, int past, int Tmax, int C,
                                int NH) override;
  void gelu_forward(void*, const void*, size_t n) override;
  void gelu_backward(void*, const void*, const void*, size_t n) override;
  void residual_forward(void*, const void*, const void*, size_t n) override;
  void residual_backward(void*, const void*, size_t n) override;
  void classifier_forward(float*, const void*, const int*, int N, int V, int Vp) override;
  void classifier_backward(void*, float*, double*, const int*, float, int N, int V, int Vp) override;
  void embedding_slice_forward(void*, const int*, const void*, int lo, int rows, int N, int C) override;
  void embedding_slice_backward(float*, const void*, const int*, int lo, int rows, int N, int C) override;
  void position_forward(void*, const void*, int first, int n, int T, int C) override;
  void position_backward(float*, const void*, int first, int n, int T, int C) override;
  void bias_forward(void*, const void*, int N, int OC) override;
  void bias_backward(float*, const void*, int N, int OC) override;
  void classifier_slice_stats(float*, float*, const void*, const int*, int lo, int valid, int N, int Vs,
                              int V) override;
  void classifier_slice_sumexp(float*, const void*, const float*, int valid, int N, int Vs) override;
  void classifier_slice_backward(void* logits_to_dlogits, float*, double*, const float*, const float*, const float*,
                                 const int*, int lo, int valid, float, int N, int Vs) override;
  void adamw_update(float*, const float*, float*, float*, void* param_out, size_t n, const AdamWParams&) override;
  double sum_squares(const float*, size_t n) override;
  double sum_squares_all(const float* const* xs, const size_t* ns, int count) override;
  void accumulate_f32(float*, const float*, size_t n, float) override;

  // The unit whose ops follow (-1: none), for the per-unit table.
  void set_unit(int unit) { unit_ = unit; }
  // Seconds of compute per unit and phase (forward, recompute, backward), and the products' FLOPs.
  const std::vector<std::array<double, 3>>& unit_seconds() const { return unit_s_; }
  double products_flops() const { return flops_; }

 protected:
  void* raw_alloc(size_t bytes) override;
  void raw_free(void*) override {}
  void* raw_alloc_host(size_t bytes) override { return raw_alloc(bytes); }
  void raw_free_host(void*) override {}

 private:
  SimBackend(SimBackend& device);  // the host side of `device`
  OpTarget target() const;
  void run(const OpCosts& ops, Phase p);
  void model_op(const OpCosts& ops, bool backward);  // forward / recompute / backward by the rule above
  void engine_op(const OpCosts& ops) { run(ops, Phase::engine); }
  uint64_t stream_copy(bool to_host, size_t bytes);  // on the copy stream of that direction: its ticket

  DeviceKind kind_;
  Timeline& tl_;
  const RankRates* rates_;
  mutable SimDeviceInfo info_{rates_};
  SimBackend* host_of_ = nullptr;  // the device whose host side this is
  AttentionPath attention_ = AttentionPath::simple;
  cuda::CudnnPlanWorkspace cudnn_ws_;
  uintptr_t next_ = 0;             // the next unbacked address (shared through host_of_)
  void* scratch_ = nullptr;        // cuda: the op scratch block (reserve_workspace)
  int64_t scratch_bytes_ = 0;
  void* blas_ = nullptr;           // cuda: the cuBLASLt workspace
  bool in_backward_ = false;
  int unit_ = -1;
  std::vector<std::array<double, 3>> unit_s_;
  double flops_ = 0;
};

}  // namespace gpt::sim
