// The CPU backend: fp32 compute in ordinary RAM. "Device" and "host" allocations are both 64-byte aligned
// heap memory but go to separate ledger domains, so offload is measured on CPU too. Copies are memcpy,
// synchronize is a no-op (every op has finished when it returns), and each op forwards to kernels/cpu.
// The peak for MFU is this CPU's measured sgemm rate, measured on first request and kept (peak_flops.h).
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <optional>

#include "kernels/cpu/ops.h"
#include "kernels/sizes.h"
#include "src/backend/backend.h"
#include "src/backend/peak_flops.h"

namespace gpt {

namespace {

void* aligned_alloc64(size_t bytes) {
  size_t rounded = (bytes + 63) / 64 * 64;  // aligned_alloc wants a multiple of the alignment
  return std::aligned_alloc(64, rounded);
}

float* f(void* p) { return static_cast<float*>(p); }
const float* f(const void* p) { return static_cast<const float*>(p); }

// This CPU's peak: its sgemm rate, measured on the first request and kept (peak_flops.h).
class CpuDeviceInfo : public DeviceInfo {
 public:
  PeakFlops peak_flops() const override {
    if (!peak_) peak_ = measure_cpu_peak_flops(kStartupPeak);
    return *peak_;
  }
  PeakFlops remeasure_peak_flops() override {
    const PeakFlops fresh = measure_cpu_peak_flops(kRemeasurePeak);
    if (!peak_ || fresh.flops > peak_->flops) peak_ = fresh;
    return fresh;
  }

 private:
  mutable std::optional<PeakFlops> peak_;  // the calibration, run on the first peak_flops()
};

class CpuBackend : public Backend {
 public:
  ~CpuBackend() override = default;
  std::string name() const override { return "cpu"; }
  DeviceKind kind() const override { return DeviceKind::cpu; }
  DType compute_dtype() const override { return DType::F32; }
  DeviceInfo& device_info() const override { return info_; }

  void zero(void* p, size_t bytes) override { std::memset(p, 0, bytes); }
  void copy_d2d(void* dst, const void* src, size_t bytes) override { std::memcpy(dst, src, bytes); }
  void copy_h2d(void* dst, const void* src, size_t bytes) override { std::memcpy(dst, src, bytes); }
  void copy_d2h(void* dst, const void* src, size_t bytes) override { std::memcpy(dst, src, bytes); }
  void synchronize() override {}
  void f32_to_compute(void* dst, const float* src, size_t n) override { std::memcpy(dst, src, n * 4); }
  void compute_to_f32(float* dst, const void* src, size_t n) override { std::memcpy(dst, src, n * 4); }
  void f32_to_bf16(void* dst, const float* src, size_t n) override {
    auto* out = static_cast<uint16_t*>(dst);  // (n) bf16 words
    for (size_t i = 0; i < n; i++) out[i] = bf16_round(src[i]);
  }
  void bf16_to_f32(float* dst, const void* src, size_t n) override {
    const auto* in = static_cast<const uint16_t*>(src);  // (n) bf16 words
    for (size_t i = 0; i < n; i++) dst[i] = bf16_widen(in[i]);
  }

  void encoder_forward(void* out, const int* tokens, const void* wte, const void* wpe, int B, int T,
                       int C) override {
    cpu::encoder_forward(f(out), tokens, f(wte), f(wpe), B, T, C);
  }
  void encoder_backward(float* dwte, float* dwpe, const void* dout, const int* tokens, int B, int T,
                        int C) override {
    cpu::encoder_backward(dwte, dwpe, f(dout), tokens, B, T, C);
  }

  void layernorm_forward(void* out, float* mean, float* rstd, const void* inp, const void* w, const void* b,
                         int N, int C) override {
    cpu::layernorm_forward(f(out), mean, rstd, f(inp), f(w), f(b), N, C);
  }
  void layernorm_backward(void* dinp, float* dw, float* db, const void* dout, const void* inp, const void* w,
                          const float* mean, const float* rstd, int N, int C) override {
    cpu::layernorm_backward(f(dinp), dw, db, f(dout), f(inp), f(w), mean, rstd, N, C);
  }
  void residual_layernorm_forward(void* res, void* out, float* mean, float* rstd, const void* a, const void* b,
                                  const void* w, const void* bias, int N, int C) override {
    cpu::residual_layernorm_forward(f(res), f(out), mean, rstd, f(a), f(b), f(w), f(bias), N, C);
  }
  void layernorm_backward_residual(void* dres, float* dw, float* db, const void* dout, const void* inp,
                                   const void* w, const float* mean, const float* rstd, int N, int C) override {
    cpu::layernorm_backward_residual(f(dres), dw, db, f(dout), f(inp), f(w), mean, rstd, N, C);
  }

  void matmul_forward(void* out, const void* inp, const void* w, const void* bias, int N, int C,
                      int OC) override {
    cpu::matmul_forward(f(out), f(inp), f(w), f(bias), N, C, OC);
  }
  void matmul_gelu_forward(void* out, void* pre, const void* inp, const void* w, const void* bias, int N, int C,
                           int OC) override {
    cpu::matmul_gelu_forward(f(out), f(pre), f(inp), f(w), f(bias), N, C, OC);
  }
  void matmul_backward(void* dinp, float* dw, float* dbias, const void* dout, const void* inp, const void* w,
                       int N, int C, int OC) override {
    cpu::matmul_backward(f(dinp), dw, dbias, f(dout), f(inp), f(w), N, C, OC);
  }
  void gelu_matmul_backward(void* dpre, float* dw, float* dbias, const void* dout, const void* inp, const void* pre,
                            const void* w, int N, int C, int OC) override {
    cpu::gelu_matmul_backward(f(dpre), dw, dbias, f(dout), f(inp), f(pre), f(w), N, C, OC);
  }

  size_t attention_state_bytes(int B, int T, int NH) const override {
    return (size_t)cpu::attention_state_bytes(B, T, NH);
  }
  void attention_forward(void* out, void* state, const void* qkv, int B, int T, int C, int NH) override {
    cpu::attention_forward(f(out), f(state), f(qkv), B, T, C, NH);
  }
  void attention_backward(void* dqkv, const void* dout, const void* qkv, const void* /*out*/,
                          const void* state, int B, int T, int C, int NH) override {
    cpu::attention_backward(f(dqkv), f(dout), f(qkv), f(state), B, T, C, NH);
  }
  void attention_cached_forward(void* out, void* kcache, void* vcache, const void* qkv, int B, int Tn, int past,
                                int Tmax, int C, int NH) override {
    cpu::attention_cached_forward(f(out), f(kcache), f(vcache), f(qkv), B, Tn, past, Tmax, C, NH);
  }

  void gelu_forward(void* out, const void* inp, size_t n) override { cpu::gelu_forward(f(out), f(inp), n); }
  void gelu_backward(void* dinp, const void* inp, const void* dout, size_t n) override {
    cpu::gelu_backward(f(dinp), f(inp), f(dout), n);
  }

  void residual_forward(void* out, const void* a, const void* b, size_t n) override {
    cpu::residual_forward(f(out), f(a), f(b), n);
  }
  void residual_backward(void* dstream, const void* dbranch, size_t n) override {
    cpu::residual_backward(f(dstream), f(dbranch), n);
  }

  void classifier_forward(float* losses, const void* logits, const int* targets, int N, int V,
                          int Vp) override {
    cpu::classifier_forward(losses, f(logits), targets, N, V, Vp);
  }
  void classifier_backward(void* logits_to_dlogits, float* losses, double* loss_sum, const int* targets, float dloss,
                           int N, int V, int Vp) override {
    cpu::classifier_backward(f(logits_to_dlogits), losses, loss_sum, targets, dloss, N, V, Vp);
  }

  void embedding_slice_forward(void* out, const int* tokens, const void* wte_rows, int lo, int rows, int N,
                               int C) override {
    cpu::embedding_slice_forward(f(out), tokens, f(wte_rows), lo, rows, N, C);
  }
  void embedding_slice_backward(float* dwte_rows, const void* dout, const int* tokens, int lo, int rows, int N,
                                int C) override {
    cpu::embedding_slice_backward(dwte_rows, f(dout), tokens, lo, rows, N, C);
  }
  void position_forward(void* x, const void* wpe, int first, int n, int T, int C) override {
    cpu::position_forward(f(x), f(wpe), first, n, T, C);
  }
  void position_backward(float* dwpe, const void* dout, int first, int n, int T, int C) override {
    cpu::position_backward(dwpe, f(dout), first, n, T, C);
  }
  void bias_forward(void* x, const void* bias, int N, int OC) override { cpu::bias_forward(f(x), f(bias), N, OC); }
  void bias_backward(float* dbias, const void* dout, int N, int OC) override {
    cpu::bias_backward(dbias, f(dout), N, OC);
  }
  void classifier_slice_stats(float* maxes, float* target, const void* logits, const int* targets, int lo, int valid,
                              int N, int Vs, int V) override {
    cpu::classifier_slice_stats(maxes, target, f(logits), targets, lo, valid, N, Vs, V);
  }
  void classifier_slice_sumexp(float* sums, const void* logits, const float* maxes, int valid, int N,
                               int Vs) override {
    cpu::classifier_slice_sumexp(sums, f(logits), maxes, valid, N, Vs);
  }
  void classifier_slice_backward(void* logits_to_dlogits, float* losses, double* loss_sum, const float* maxes,
                                 const float* sums, const float* target, const int* targets, int lo, int valid,
                                 float dloss, int N, int Vs) override {
    cpu::classifier_slice_backward(f(logits_to_dlogits), losses, loss_sum, maxes, sums, target, targets, lo, valid,
                                   dloss, N, Vs);
  }

  void adamw_update(float* param, const float* grad, float* m, float* v, void* param_out, size_t n,
                    const AdamWParams& hp) override {
    cpu::adamw_update(param, grad, m, v, static_cast<float*>(param_out), n, hp);
  }
  double sum_squares(const float* x, size_t n) override { return cpu::sum_squares(x, n); }
  double sum_squares_all(const float* const* xs, const size_t* ns, int count) override {
    return cpu::sum_squares_all(xs, ns, count);
  }
  void accumulate_f32(float* y, const float* x, size_t n, float divisor) override {
    cpu::accumulate_f32(y, x, n, divisor);
  }

 protected:
  void* raw_alloc(size_t bytes) override { return aligned_alloc64(bytes); }
  void raw_free(void* p) override { std::free(p); }
  void* raw_alloc_host(size_t bytes) override { return aligned_alloc64(bytes); }
  void raw_free_host(void* p) override { std::free(p); }

 private:
  mutable CpuDeviceInfo info_;  // its peak, measured on the first peak_flops()
};

// The CPU kernels on another backend's host memory (see make_host_backend).
class HostSideBackend final : public CpuBackend {
 public:
  explicit HostSideBackend(Backend& device) : device_(device) {}
  std::string name() const override { return device_.name() + " host"; }
  void* alloc(size_t bytes, MemCat cat) override { return device_.alloc_host(bytes, cat); }
  void* alloc_host(size_t bytes, MemCat cat) override { return device_.alloc_host(bytes, cat); }
  void free(void* p) override { device_.free_host(p); }
  void free_host(void* p) override { device_.free_host(p); }
  MemoryLedger& ledger() override { return device_.ledger(); }

 private:
  Backend& device_;
};

}  // namespace

std::unique_ptr<Backend> make_cpu_backend() { return std::make_unique<CpuBackend>(); }
std::unique_ptr<Backend> make_host_backend(Backend& device) { return std::make_unique<HostSideBackend>(device); }

}  // namespace gpt
