// See sim_backend.h. Each op prices its own arguments (op_costs.h) and lands on the timeline.
#include "src/sim/sim_backend.h"

#include <cstring>

#include "src/core/check.h"
#include "src/util/trace.h"

namespace gpt::sim {

namespace {
constexpr uintptr_t kBase = uintptr_t{1} << 44;  // unbacked addresses start here (16 TiB, never mapped)
constexpr uintptr_t kAlign = 256;
}  // namespace

SimBackend::SimBackend(const SimDevice& dev, Timeline& tl, const RankRates* rates)
    : kind_(dev.kind), tl_(tl), rates_(rates), attention_(dev.attention), cudnn_ws_(dev.cudnn_workspace), next_(kBase) {
  GPT_CHECK(dev.kind == DeviceKind::cpu || dev.kind == DeviceKind::cuda, "sim: unknown device kind");
  // The cuda backend allocates its cuBLASLt workspace at construction.
  if (kind_ == DeviceKind::cuda) blas_ = alloc((size_t)cuda::kCublasWorkspaceBytes, MemCat::workspace);
}

SimBackend::SimBackend(SimBackend& device)
    : kind_(device.kind_), tl_(device.tl_), rates_(device.rates_), host_of_(&device), attention_(device.attention_) {}

SimBackend::~SimBackend() {
  if (host_of_) return;
  free(scratch_);
  free(blas_);
}

void* SimBackend::raw_alloc(size_t bytes) {
  if (host_of_) return host_of_->raw_alloc(bytes);
  const uintptr_t p = next_;
  next_ += (bytes + kAlign - 1) / kAlign * kAlign;
  return reinterpret_cast<void*>(p);
}

void* SimBackend::alloc(size_t bytes, MemCat cat) {
  return host_of_ ? host_of_->alloc_host(bytes, cat) : Backend::alloc(bytes, cat);
}
void SimBackend::free(void* p) { host_of_ ? host_of_->free_host(p) : Backend::free(p); }
void* SimBackend::alloc_host(size_t bytes, MemCat cat) {
  return host_of_ ? host_of_->alloc_host(bytes, cat) : Backend::alloc_host(bytes, cat);
}
void SimBackend::free_host(void* p) { host_of_ ? host_of_->free_host(p) : Backend::free_host(p); }

std::unique_ptr<Backend> SimBackend::host_side() {
  GPT_CHECK(!host_of_, "sim: the host side has no host side of its own");
  return std::unique_ptr<Backend>(new SimBackend(*this));
}

// As the cuda backend: one scratch block sized for the largest shapes, grown (never shrunk) when asked.
void SimBackend::reserve_workspace(int B, int T, int C, int NH, int max_bias_oc, int tp) {
  if (kind_ != DeviceKind::cuda || host_of_) return;
  const int64_t need = cuda::op_scratch_bytes(B, T, C, NH, max_bias_oc, attention_, cudnn_ws_, tp);
  if (need <= scratch_bytes_) return;
  free(scratch_);
  scratch_ = alloc((size_t)need, MemCat::workspace);
  scratch_bytes_ = need;
}

void SimBackend::set_attention_path(AttentionPath path, bool automatic) {
  if (kind_ == DeviceKind::cpu) return Backend::set_attention_path(path, automatic);
  attention_ = path;
}

size_t SimBackend::attention_state_bytes(int B, int T, int NH) const {
  return (size_t)(kind_ == DeviceKind::cpu ? cpu::attention_state_bytes(B, T, NH)
                                           : cuda::attention_state_bytes(attention_, B, T, NH));
}

OpTarget SimBackend::target() const {
  OpTarget t;
  t.cpu = kind_ == DeviceKind::cpu;
  t.cs = t.cpu ? 4 : 2;
  t.fused_attention = attention_ != AttentionPath::simple;
  t.host = host_of_ != nullptr;
  return t;
}

// The host side of a GPU runs on the host thread; everything else on the compute stream (which on the cpu
// backend is the host).
void SimBackend::run(const OpCosts& ops, Phase p) {
  const double d = rates_ ? rates_->seconds(ops) : 0;
  const double end = host_of_ ? tl_.host(d, p) : tl_.compute(d, p);
  // The engine's and the optimizer's own work on the device, which no unit's compute span covers.
  if (!host_of_ && d > 0 && (p == Phase::engine || p == Phase::optimizer) && trace::on())
    trace::span(trace::kEngineStream, ops[0].name, "engine", (end - d) * 1e6, end * 1e6);
  const double f = gpt::products_flops(ops);
  flops_ += f;
  if (host_of_) host_of_->flops_ += f;
  if (unit_ >= 0 && is_model_phase(p)) {
    if ((int)unit_s_.size() <= unit_) unit_s_.resize(unit_ + 1, {0, 0, 0});
    unit_s_[unit_][p == Phase::forward ? 0 : p == Phase::recompute ? 1 : 2] += d;
  }
}

void SimBackend::model_op(const OpCosts& ops, bool backward) {
  if (backward) in_backward_ = true;
  run(ops, backward ? Phase::backward : in_backward_ ? Phase::recompute : Phase::forward);
}

// ---- memory work ----
void SimBackend::zero(void*, size_t bytes) { engine_op(op_cost::zero(target(), (double)bytes)); }
void SimBackend::copy_d2d(void*, const void*, size_t bytes) { engine_op(op_cost::copy_d2d(target(), (double)bytes)); }

// Synchronous copies: on the compute stream, and the host waits for them.
void SimBackend::copy_h2d(void*, const void*, size_t bytes) {
  tl_.host_waits(tl_.compute(rates_ ? rates_->seconds(op_cost::host_device_copy("h2d", (double)bytes)) : 0, Phase::copies),
                 Phase::copies);
}
void SimBackend::copy_d2h(void* dst, const void*, size_t bytes) {
  copy_h2d(nullptr, nullptr, bytes);
  // What the host reads back is neutral: zeros, where the destination is real host memory (not an address
  // this machine gave out).
  const uintptr_t d = reinterpret_cast<uintptr_t>(dst);
  const SimBackend& dev = host_of_ ? *host_of_ : *this;
  if (dst && !(d >= kBase && d < dev.next_)) std::memset(dst, 0, bytes);
}

// A copy on the copy stream of its direction (after everything queued so far), with its span on that
// stream's simulated track.
uint64_t SimBackend::stream_copy(bool to_host, size_t bytes) {
  const char* what = to_host ? "d2h" : "h2d";
  const double d = rates_ ? rates_->seconds(op_cost::host_device_copy(what, (double)bytes)) : 0;
  double s = 0;
  const uint64_t t = tl_.copy(d, to_host, &s);
  if (d > 0 && trace::on())  // (the name only while recording: a plan search runs this millions of times)
    trace::span(to_host ? trace::kCopyStreamD2H : trace::kCopyStream, str(what, " ", bytes, " B"), "copy", s * 1e6,
                tl_.copy_end(t) * 1e6);
  return t;
}
uint64_t SimBackend::copy_h2d_async(void*, const void*, size_t bytes) { return stream_copy(false, bytes); }
uint64_t SimBackend::copy_d2h_async(void*, const void*, size_t bytes) { return stream_copy(true, bytes); }

void SimBackend::f32_to_compute(void*, const float*, size_t n) {
  engine_op(op_cost::convert(target(), "to compute dtype", (double)n, 4.0 + (double)target().cs));
}
void SimBackend::compute_to_f32(float*, const void*, size_t n) {
  engine_op(op_cost::convert(target(), "to fp32", (double)n, 4.0 + (double)target().cs));
}
void SimBackend::f32_to_bf16(void*, const float*, size_t n) { engine_op(op_cost::convert(target(), "to bf16", (double)n, 6)); }
void SimBackend::bf16_to_f32(float*, const void*, size_t n) { engine_op(op_cost::convert(target(), "to fp32", (double)n, 6)); }

// ---- model ops ----
void SimBackend::encoder_forward(void*, const int*, const void*, const void*, int B, int T, int C) {
  in_backward_ = false;  // a micro-step's forward starts here
  model_op(op_cost::encoder_forward(target(), B, T, C), false);
}
void SimBackend::encoder_backward(float*, float*, const void*, const int*, int B, int T, int C) {
  model_op(op_cost::encoder_backward(target(), B, T, C), true);
}
void SimBackend::layernorm_forward(void*, float*, float*, const void*, const void*, const void*, int N, int C) {
  model_op(op_cost::layernorm_forward(target(), N, C), false);
}
void SimBackend::layernorm_backward(void*, float*, float*, const void*, const void*, const void*, const float*,
                                    const float*, int N, int C) {
  model_op(op_cost::layernorm_backward(target(), N, C), true);
}
void SimBackend::residual_layernorm_forward(void*, void*, float*, float*, const void*, const void*, const void*,
                                            const void*, int N, int C) {
  model_op(op_cost::residual_layernorm_forward(target(), N, C), false);
}
void SimBackend::layernorm_backward_residual(void*, float*, float*, const void*, const void*, const void*,
                                             const float*, const float*, int N, int C) {
  model_op(op_cost::layernorm_backward_residual(target(), N, C), true);
}
void SimBackend::matmul_forward(void*, const void*, const void*, const void*, int N, int C, int OC) {
  model_op(op_cost::matmul_forward(target(), N, C, OC), false);
}
void SimBackend::matmul_gelu_forward(void*, void*, const void*, const void*, const void*, int N, int C, int OC) {
  model_op(op_cost::matmul_gelu_forward(target(), N, C, OC), false);
}
void SimBackend::matmul_backward(void*, float*, float* dbias, const void*, const void*, const void*, int N, int C,
                                 int OC) {
  model_op(op_cost::matmul_backward(target(), N, C, OC, dbias != nullptr), true);
}
void SimBackend::gelu_matmul_backward(void*, float*, float* dbias, const void*, const void*, const void*, const void*,
                                      int N, int C, int OC) {
  model_op(op_cost::gelu_matmul_backward(target(), N, C, OC, dbias != nullptr), true);
}
void SimBackend::attention_forward(void*, void*, const void*, int B, int T, int C, int NH) {
  model_op(op_cost::attention_forward(target(), B, T, C, NH), false);
}
void SimBackend::attention_backward(void*, const void*, const void*, const void*, const void*, int B, int T, int C,
                                    int NH) {
  model_op(op_cost::attention_backward(target(), B, T, C, NH), true);
}
void SimBackend::attention_cached_forward(void*, void*, void*, const void*, int B, int Tn, int past, int, int C,
                                          int NH) {
  model_op(op_cost::attention_cached_forward(target(), B, Tn, past, C, NH), false);
}
void SimBackend::gelu_forward(void*, const void*, size_t n) { model_op(op_cost::gelu_forward(target(), (double)n), false); }
void SimBackend::gelu_backward(void*, const void*, const void*, size_t n) {
  model_op(op_cost::gelu_backward(target(), (double)n), true);
}
void SimBackend::residual_forward(void*, const void*, const void*, size_t n) {
  model_op(op_cost::residual_forward(target(), (double)n), false);
}
void SimBackend::residual_backward(void*, const void*, size_t n) {
  model_op(op_cost::residual_backward(target(), (double)n), true);
}
void SimBackend::classifier_forward(float*, const void*, const int*, int N, int V, int Vp) {
  model_op(op_cost::classifier_forward(target(), N, V, Vp), false);
}
void SimBackend::classifier_backward(void*, float*, double*, const int*, float, int N, int V, int Vp) {
  model_op(op_cost::classifier_backward(target(), N, V, Vp), true);
}

// ---- tensor-parallel model ops (the TP collectives between them are sim_comm's) ----
void SimBackend::embedding_slice_forward(void*, const int*, const void*, int, int, int N, int C) {
  in_backward_ = false;  // the vocab-parallel embedding starts a micro-step's forward, as encoder_forward does
  model_op(op_cost::embedding_slice_forward(target(), N, C), false);
}
void SimBackend::embedding_slice_backward(float*, const void*, const int*, int, int, int N, int C) {
  model_op(op_cost::embedding_slice_backward(target(), N, C), true);
}
void SimBackend::position_forward(void*, const void*, int, int n, int, int C) {
  model_op(op_cost::position_forward(target(), n, C), false);
}
void SimBackend::position_backward(float*, const void*, int, int n, int T, int C) {
  model_op(op_cost::position_backward(target(), n, T, C), true);
}
void SimBackend::bias_forward(void*, const void*, int N, int OC) {
  model_op(op_cost::bias_forward(target(), N, OC), false);
}
void SimBackend::bias_backward(float*, const void*, int N, int OC) {
  model_op(op_cost::bias_backward(target(), N, OC), true);
}
// The loss's statistics passes are forward work; the last pass is the backward when it writes dlogits (the
// training pass, as classifier_backward), else the forward's losses (as classifier_forward).
void SimBackend::classifier_slice_stats(float*, float*, const void*, const int*, int, int, int N, int Vs, int) {
  model_op(op_cost::classifier_slice_stats(target(), N, Vs), false);
}
void SimBackend::classifier_slice_sumexp(float*, const void*, const float*, int valid, int N, int Vs) {
  model_op(op_cost::classifier_slice_sumexp(target(), N, valid, Vs), false);
}
void SimBackend::classifier_slice_backward(void* logits_to_dlogits, float*, double*, const float*, const float*,
                                           const float*, const int*, int, int valid, float, int N, int Vs) {
  const bool dlogits = logits_to_dlogits != nullptr;
  model_op(op_cost::classifier_slice_backward(target(), N, valid, Vs, dlogits), dlogits);
}

// ---- the optimizer's and the engine's states work ----
void SimBackend::adamw_update(float*, const float*, float*, float*, void* param_out, size_t n, const AdamWParams&) {
  run(op_cost::adamw_update(target(), (double)n, param_out != nullptr), Phase::optimizer);
}
double SimBackend::sum_squares(const float*, size_t n) {
  run(op_cost::sum_squares(target(), (double)n), Phase::optimizer);
  if (!host_of_) tl_.host_waits(tl_.compute_free(), Phase::optimizer);  // the host reads the sum
  return 0;
}
// Every buffer's reduction queued, then one host wait (as the cuda backend does it).
double SimBackend::sum_squares_all(const float* const*, const size_t* ns, int count) {
  for (int i = 0; i < count; i++) run(op_cost::sum_squares(target(), (double)ns[i]), Phase::optimizer);
  if (!host_of_) tl_.host_waits(tl_.compute_free(), Phase::optimizer);
  return 0;
}
void SimBackend::accumulate_f32(float*, const float*, size_t n, float) {
  run(op_cost::accumulate_f32(target(), (double)n), Phase::engine);
}

}  // namespace gpt::sim
