// The CUDA backend: bf16 compute dtype, one compute stream that every op and plain copy is queued on, two
// copy streams for the offload copies, one per direction (copy_stream.h: ordered against compute by events
// only; PCIe moves both ways at once), one
// cuBLASLt handle with a 32 MiB workspace (and its cache of planned products), and one scratch block for
// ops with temporaries (attention's head-major copies and (T,T) matrices, or the cuDNN attention plans'
// workspace, the deterministic gradient reductions). reserve_workspace sizes the scratch for a model's
// largest ops before the first step (building the cuDNN attention plans there, on the cudnn path); after
// that an op needing more fails (no cudaMalloc inside a step). Before any reservation (op unit tests) the
// scratch grows on demand, after waiting for the stream, so no op sees its scratch freed under it. Both
// blocks are tagged "workspace" in the ledger.
//
// Waits and time: every host synchronisation polls (device_wait.h), so a hung collective ends the rank with
// a message instead of blocking it; the compute and copy streams each carry a clock (stream_clock.h) bound
// to the trace's "compute", "copies" and "copies d2h" tracks, so a --trace on cuda shows when the work ran,
// not when it was queued.
//
// Memory cross-check: the device bytes in use as the driver sees them (cudaMemGetInfo) are recorded at
// construction, so cuda_memory_check can set the ledger against what the process has allocated since.
//
// Device choice: the caller passes its node-local rank (make_backend(DeviceKind::cuda, local_rank), from
// Communicator::local_rank, whatever the launcher), and cuda_pick_device (cuda_device.h) gives its GPU.
// cuda_backend.h exposes the compute stream and that device to the NCCL communicator.
//
// Reports: peak_flops names the GPU's dense bf16 peak from its compute capability, SM count, clock and
// name (src/backend/peak_flops.h); driver_memory sets the ledger against cudaMemGetInfo.
#include <algorithm>
#include <cstdio>
#include <memory>
#include <optional>

#include "kernels/cuda/attention_cudnn.cuh"
#include "kernels/cuda/ops.cuh"
#include "src/backend/backend.h"
#include "src/backend/cuda/copy_stream.h"
#include "src/backend/cuda/cuda_backend.h"
#include "src/backend/cuda/cuda_device.h"
#include "src/backend/cuda/device_wait.h"
#include "src/backend/cuda/stream_clock.h"
#include "src/backend/peak_flops.h"
#include "src/util/trace.h"

namespace gpt {

namespace {

using cuda::bf16;

constexpr size_t kCublasWorkspaceBytes = (size_t)cuda::kCublasWorkspaceBytes;  // kernels/sizes.h

// fp32 <-> bf16 conversions (parameter gathers and the bf16 gradient path: memory-bound). With `vec` (both
// buffers 16-byte aligned) a thread converts 8 elements per iteration: two 16-byte fp32 accesses and one
// 16-byte bf16 access; the last n % 8 go one by one. Rounding is to nearest even either way.
__global__ void f32_to_bf16_kernel(bf16* dst, const float* src, size_t n, bool vec) {
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  const size_t tid = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x;
  size_t done = 0;
  if (vec) {
    const size_t n8 = n / cuda::kVec;
    for (size_t i = tid; i < n8; i += stride) {
      const float4 a = reinterpret_cast<const float4*>(src)[2 * i], b = reinterpret_cast<const float4*>(src)[2 * i + 1];
      const float x[cuda::kVec] = {a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w};
      cuda::store8(dst + i * cuda::kVec, x);
    }
    done = n8 * cuda::kVec;
  }
  for (size_t i = done + tid; i < n; i += stride) dst[i] = cuda::to_bf16(src[i]);
}

__global__ void bf16_to_f32_kernel(float* dst, const bf16* src, size_t n, bool vec) {
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  const size_t tid = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x;
  size_t done = 0;
  if (vec) {
    const size_t n8 = n / cuda::kVec;
    for (size_t i = tid; i < n8; i += stride) {
      float x[cuda::kVec];
      cuda::load8(x, src + i * cuda::kVec);
      reinterpret_cast<float4*>(dst)[2 * i] = make_float4(x[0], x[1], x[2], x[3]);
      reinterpret_cast<float4*>(dst)[2 * i + 1] = make_float4(x[4], x[5], x[6], x[7]);
    }
    done = n8 * cuda::kVec;
  }
  for (size_t i = done + tid; i < n; i += stride) dst[i] = cuda::to_f32(src[i]);
}

bf16* H(void* p) { return static_cast<bf16*>(p); }
const bf16* H(const void* p) { return static_cast<const bf16*>(p); }

// Kernel code loaded on first launch and the CUDA libraries' own small buffers: what the driver may count
// beyond the ledger and allocation rounding before the start-up report warns.
constexpr int64_t kCodeAllowance = int64_t{64} << 20;

class CudaBackend final : public Backend {
 public:
  explicit CudaBackend(int local_rank) : device_(cuda_pick_device(local_rank)) {
    CUDA_CHECK(cudaSetDevice(device_));
    CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));  // no implicit waits on stream 0
    for (auto& c : copy_) c = std::make_unique<cuda::CopyStream>();
    compute_clock_ = std::make_unique<cuda::EventClock>(stream_);
    trace::bind_clock(trace::kCompute, compute_clock_.get());
    for (int d = 0; d < 2; d++) {
      cuda::CopyStream& c = *copy_[d];
      copy_clock_[d] = std::make_unique<cuda::EventClock>(c.stream(), [this, &c] { c.follow(stream_); });
      trace::bind_clock(d ? trace::kCopiesD2H : trace::kCopies, copy_clock_[d].get());
    }
    CUBLAS_CHECK(cublasLtCreate(&blas_.handle));
    baseline_in_use_ = driver_in_use();  // the context and handle exist; nothing of ours is allocated yet
    blas_.workspace = alloc(kCublasWorkspaceBytes, MemCat::workspace);
    blas_.workspace_bytes = kCublasWorkspaceBytes;
  }
  ~CudaBackend() override {
    compute_clock_.reset();  // unbinds the trace's tracks
    for (auto& c : copy_clock_) c.reset();
    cudaStreamSynchronize(stream_);  // no throwing in a destructor: errors here are ignored
    for (auto& c : copy_)
      if (c) cudaStreamSynchronize(c->stream());
#ifdef GPT_WITH_CUDNN
    cudnn_.reset();  // its handle is bound to stream_
#endif
    release(scratch_);
    release(blas_.workspace);
    blas_.plans.clear();  // the plans' descriptors go before the handle
    if (blas_.handle) cublasLtDestroy(blas_.handle);
    if (stream_) cudaStreamDestroy(stream_);
  }

  std::string name() const override { return "cuda"; }
  DeviceKind kind() const override { return DeviceKind::cuda; }
  cudaStream_t stream() const { return stream_; }
  int device() const { return device_; }
  DType compute_dtype() const override { return DType::BF16; }
  size_t gemm_plan_count() const { return blas_.plans.size(); }

  void reserve_workspace(int B, int T, int C, int NH, int max_bias_oc, int tp) override {
    GPT_CHECK(B >= 1 && T >= 1 && C >= 1 && NH >= 1 && max_bias_oc >= 0 && tp >= 1 && NH % tp == 0,
              "reserve_workspace: shapes must be positive, got B=", B, " T=", T, " C=", C, " NH=", NH,
              " max_bias_oc=", max_bias_oc, " tp=", tp);
    const cuda::CudnnPlanWorkspace ws = plan_cudnn_attention(B, T, C / tp, NH / tp);
    const size_t need = (size_t)cuda::op_scratch_bytes(B, T, C, NH, max_bias_oc, attention_, ws, tp);
    if (need > scratch_bytes_) grow_scratch(need);
    reserved_ = true;
  }

  // The ledger's device total against the driver's count of device bytes in use since construction.
  CudaMemoryCheck memory_check() const {
    CudaMemoryCheck m;
    m.ledger_bytes = ledger().current_total(MemDomain::device);
    m.driver_bytes = driver_in_use() - baseline_in_use_;
    m.live_allocations = live_allocations_;
    m.slack_bytes = kCudaAllocGranularity * live_allocations_;
    return m;
  }
  // The device as the run's reports measure it (device_info.h): the methods below, behind the interface.
  class Info final : public DeviceInfo {
   public:
    explicit Info(const CudaBackend& be) : be_(be) {}
    PeakFlops peak_flops() const override { return be_.gpu_peak_flops(); }
    std::optional<DriverMemory> driver_memory() const override { return be_.driver_memory(); }
    int64_t device_memory_free() const { return be_.device_memory_free(); }

   private:
    const CudaBackend& be_;
  };
  DeviceInfo& device_info() const override { return info_; }

  std::optional<DriverMemory> driver_memory() const {
    const CudaMemoryCheck m = memory_check();
    DriverMemory d;
    d.driver_query = "cudaMemGetInfo";
    d.ledger_bytes = m.ledger_bytes;
    d.workspace_bytes = ledger().current(MemDomain::device, MemCat::workspace);
    d.driver_bytes = m.driver_bytes;
    d.explained_bytes = m.slack_bytes + kCodeAllowance;
    return d;
  }
  PeakFlops gpu_peak_flops() const {
    cudaDeviceProp prop{};
    CUDA_CHECK(cudaGetDeviceProperties(&prop, device_));
    GpuFacts gpu;
    gpu.name = prop.name;
    gpu.major = prop.major;
    gpu.minor = prop.minor;
    CUDA_CHECK(cudaDeviceGetAttribute(&gpu.sms, cudaDevAttrMultiProcessorCount, device_));
    CUDA_CHECK(cudaDeviceGetAttribute(&gpu.clock_khz, cudaDevAttrClockRate, device_));
    return gpu_bf16_peak_flops(gpu);
  }

  void zero(void* p, size_t bytes) override {
    if (bytes) CUDA_CHECK(cudaMemsetAsync(p, 0, bytes, stream_));
  }
  void copy_d2d(void* dst, const void* src, size_t bytes) override {
    copy(dst, src, bytes, cudaMemcpyDeviceToDevice);
  }
  void copy_h2d(void* dst, const void* src, size_t bytes) override {
    copy(dst, src, bytes, cudaMemcpyHostToDevice);
  }
  void copy_d2h(void* dst, const void* src, size_t bytes) override {
    copy(dst, src, bytes, cudaMemcpyDeviceToHost);
  }
  void synchronize() override {
    cuda::wait_stream(stream_, "a device synchronisation");
    for (auto& c : copy_) c->synchronize();
  }
  // A backend ticket is the copy stream's ticket shifted left by one, its low bit the direction (1: to host).
  uint64_t copy_h2d_async(void* dst, const void* src, size_t bytes) override {
    return copy_[0]->copy(dst, src, bytes, cudaMemcpyHostToDevice, stream_) << 1;
  }
  uint64_t copy_d2h_async(void* dst, const void* src, size_t bytes) override {
    return copy_[1]->copy(dst, src, bytes, cudaMemcpyDeviceToHost, stream_) << 1 | 1;
  }
  void wait_copy_device(uint64_t ticket) override { copy_[ticket & 1]->wait_device(ticket >> 1, stream_); }
  void wait_copy_host(uint64_t ticket) override { copy_[ticket & 1]->wait_host(ticket >> 1); }

  void f32_to_compute(void* dst, const float* src, size_t n) override {
    if (n == 0) return;
    const bool vec = cuda::aligned16(dst) && cuda::aligned16(src);
    GPT_LAUNCH(f32_to_bf16_kernel, cuda::grid_for(vec ? cuda::ceil_div(n, cuda::kVec) : n, 256), 256, 0, stream_,
               H(dst), src, n, vec);
  }
  void compute_to_f32(float* dst, const void* src, size_t n) override {
    if (n == 0) return;
    const bool vec = cuda::aligned16(dst) && cuda::aligned16(src);
    GPT_LAUNCH(bf16_to_f32_kernel, cuda::grid_for(vec ? cuda::ceil_div(n, cuda::kVec) : n, 256), 256, 0, stream_, dst,
               H(src), n, vec);
  }
  // The compute dtype is bf16, so these are the same conversions.
  void f32_to_bf16(void* dst, const float* src, size_t n) override { f32_to_compute(dst, src, n); }
  void bf16_to_f32(float* dst, const void* src, size_t n) override { compute_to_f32(dst, src, n); }

  void encoder_forward(void* out, const int* tokens, const void* wte, const void* wpe, int B, int T,
                       int C) override {
    cuda::encoder_forward(H(out), tokens, H(wte), H(wpe), B, T, C, stream_);
  }
  void encoder_backward(float* dwte, float* dwpe, const void* dout, const int* tokens, int B, int T,
                        int C) override {
    void* s = scratch("encoder_backward", cuda::encoder_backward_scratch_bytes((int64_t)B * T));
    cuda::encoder_backward(dwte, dwpe, H(dout), tokens, B, T, C, s, stream_);
  }

  void layernorm_forward(void* out, float* mean, float* rstd, const void* inp, const void* w, const void* b,
                         int N, int C) override {
    cuda::layernorm_forward(H(out), mean, rstd, H(inp), H(w), H(b), N, C, stream_);
  }
  void layernorm_backward(void* dinp, float* dw, float* db, const void* dout, const void* inp, const void* w,
                          const float* mean, const float* rstd, int N, int C) override {
    void* s = scratch("layernorm_backward", cuda::layernorm_backward_scratch_bytes(C));
    cuda::layernorm_backward(H(dinp), dw, db, H(dout), H(inp), H(w), mean, rstd, N, C, s, stream_);
  }
  void residual_layernorm_forward(void* res, void* out, float* mean, float* rstd, const void* a, const void* b,
                                  const void* w, const void* bias, int N, int C) override {
    cuda::residual_layernorm_forward(H(res), H(out), mean, rstd, H(a), H(b), H(w), H(bias), N, C, stream_);
  }
  void layernorm_backward_residual(void* dres, float* dw, float* db, const void* dout, const void* inp,
                                   const void* w, const float* mean, const float* rstd, int N, int C) override {
    void* s = scratch("layernorm_backward_residual", cuda::layernorm_backward_scratch_bytes(C));
    cuda::layernorm_backward_residual(H(dres), dw, db, H(dout), H(inp), H(w), mean, rstd, N, C, s, stream_);
  }

  void matmul_forward(void* out, const void* inp, const void* w, const void* bias, int N, int C,
                      int OC) override {
    cuda::matmul_forward(H(out), H(inp), H(w), H(bias), N, C, OC, blas_, stream_);
  }
  void matmul_gelu_forward(void* out, void* pre, const void* inp, const void* w, const void* bias, int N, int C,
                           int OC) override {
    cuda::matmul_gelu_forward(H(out), H(pre), H(inp), H(w), H(bias), N, C, OC, blas_, stream_);
  }
  void matmul_backward(void* dinp, float* dw, float* dbias, const void* dout, const void* inp, const void* w,
                       int N, int C, int OC) override {
    void* s = dbias ? scratch("matmul_backward", cuda::matmul_backward_scratch_bytes(OC)) : nullptr;
    cuda::matmul_backward(H(dinp), dw, dbias, H(dout), H(inp), H(w), N, C, OC, blas_, s, stream_);
  }
  void gelu_matmul_backward(void* dpre, float* dw, float* dbias, const void* dout, const void* inp, const void* pre,
                            const void* w, int N, int C, int OC) override {
    void* s = dbias ? scratch("gelu_matmul_backward", cuda::matmul_backward_scratch_bytes(OC)) : nullptr;
    cuda::gelu_matmul_backward(H(dpre), dw, dbias, H(dout), H(inp), H(pre), H(w), N, C, OC, blas_, s, stream_);
  }

  void set_attention_path(AttentionPath path, bool automatic) override {
#ifdef GPT_WITH_CUDNN
    if (path == AttentionPath::cudnn && !cudnn_) cudnn_ = std::make_unique<cuda::CudnnAttention>(stream_);
#else
    GPT_CHECK(path != AttentionPath::cudnn, "--attention cudnn: this build has no cuDNN (use --attention fused)");
#endif
    attention_ = path;
    attention_automatic_ = automatic;
  }
  AttentionPath attention_path() const override { return attention_; }
  AttentionTarget attention_target() const override { return cuda_device_attention_target(device_); }
  size_t attention_state_bytes(int B, int T, int NH) const override {
    return (size_t)cuda::attention_state_bytes(attention_, B, T, NH);
  }
  void attention_forward(void* out, void* state, const void* qkv, int B, int T, int C, int NH) override {
    if (attention_ == AttentionPath::fused) {
      cuda::fused_attention_forward(H(out), static_cast<float*>(state), H(qkv), B, T, C, NH, stream_);
      return;
    }
#ifdef GPT_WITH_CUDNN
    if (attention_ == AttentionPath::cudnn) {
      const cuda::CudnnPlanWorkspace ws = cudnn_->plan(B, T, C, NH);  // cached since reserve_workspace
      const size_t bytes =
          cuda::cudnn_attention_closed_form(T) ? 0 : (size_t)cuda::cudnn_attention_forward_scratch_bytes(ws);
      void* s = scratch("attention_forward", bytes);
      cudnn_->forward(H(out), static_cast<float*>(state), H(qkv), B, T, C, NH, s, bytes, stream_);
      return;
    }
#endif
    void* s = scratch("attention_forward", cuda::attention_scratch_bytes(B, T, C, NH));
    cuda::attention_forward(H(out), H(state), H(qkv), B, T, C, NH, blas_, s, stream_);
  }
  void attention_backward(void* dqkv, const void* dout, const void* qkv, const void* out, const void* state,
                          int B, int T, int C, int NH) override {
    if (attention_ == AttentionPath::fused) {
      void* s = scratch("attention_backward", cuda::fused_attention_scratch_bytes(B, T, NH));
      cuda::fused_attention_backward(H(dqkv), H(dout), H(qkv), H(out), static_cast<const float*>(state), B, T, C,
                                     NH, s, stream_);
      return;
    }
#ifdef GPT_WITH_CUDNN
    if (attention_ == AttentionPath::cudnn) {
      const cuda::CudnnPlanWorkspace ws = cudnn_->plan(B, T, C, NH);
      const size_t bytes = cuda::cudnn_attention_closed_form(T)
                               ? 0
                               : (size_t)cuda::cudnn_attention_backward_scratch_bytes(B, T, C, NH, ws);
      void* s = scratch("attention_backward", bytes);
      cudnn_->backward(H(dqkv), H(dout), H(qkv), H(out), static_cast<const float*>(state), B, T, C, NH, s, bytes,
                       stream_);
      return;
    }
#endif
    void* s = scratch("attention_backward", cuda::attention_scratch_bytes(B, T, C, NH));
    cuda::attention_backward(H(dqkv), H(dout), H(qkv), H(out), H(state), B, T, C, NH, blas_, s, stream_);
  }
  void attention_cached_forward(void* out, void* kcache, void* vcache, const void* qkv, int B, int Tn, int past,
                                int Tmax, int C, int NH) override {
    cuda::attention_cached_forward(H(out), H(kcache), H(vcache), H(qkv), B, Tn, past, Tmax, C, NH, stream_);
  }
#ifdef GPT_WITH_CUDNN
  size_t cudnn_plan_count() const { return cudnn_ ? cudnn_->plan_count() : 0; }
#endif

  void gelu_forward(void* out, const void* inp, size_t n) override {
    cuda::gelu_forward(H(out), H(inp), n, stream_);
  }
  void gelu_backward(void* dinp, const void* inp, const void* dout, size_t n) override {
    cuda::gelu_backward(H(dinp), H(inp), H(dout), n, stream_);
  }
  void residual_forward(void* out, const void* a, const void* b, size_t n) override {
    cuda::residual_forward(H(out), H(a), H(b), n, stream_);
  }
  void residual_backward(void* dstream, const void* dbranch, size_t n) override {
    cuda::residual_backward(H(dstream), H(dbranch), n, stream_);
  }

  void classifier_forward(float* losses, const void* logits, const int* targets, int N, int V,
                          int Vp) override {
    cuda::classifier_forward(losses, H(logits), targets, N, V, Vp, stream_);
  }
  void classifier_backward(void* logits_to_dlogits, float* losses, double* loss_sum, const int* targets, float dloss,
                           int N, int V, int Vp) override {
    cuda::classifier_backward(H(logits_to_dlogits), losses, loss_sum, targets, dloss, N, V, Vp, stream_);
  }

  // Tensor parallelism. The embedding slice's gradient takes encoder_backward's scratch over N positions, the bias
  // gradient matmul_backward's over OC columns: both inside what reserve_workspace holds (N <= B*T, OC <= max_bias_oc).
  void embedding_slice_forward(void* out, const int* tokens, const void* wte_rows, int lo, int rows, int N,
                               int C) override {
    cuda::embedding_slice_forward(H(out), tokens, H(wte_rows), lo, rows, N, C, stream_);
  }
  void embedding_slice_backward(float* dwte_rows, const void* dout, const int* tokens, int lo, int rows, int N,
                                int C) override {
    void* s = scratch("embedding_slice_backward", cuda::encoder_backward_scratch_bytes(N));
    cuda::embedding_slice_backward(dwte_rows, H(dout), tokens, lo, rows, N, C, s, stream_);
  }
  void position_forward(void* x, const void* wpe, int first, int n, int T, int C) override {
    cuda::position_forward(H(x), H(wpe), first, n, T, C, stream_);
  }
  void position_backward(float* dwpe, const void* dout, int first, int n, int T, int C) override {
    cuda::position_backward(dwpe, H(dout), first, n, T, C, stream_);
  }
  void bias_forward(void* x, const void* bias, int N, int OC) override {
    cuda::bias_forward(H(x), H(bias), N, OC, stream_);
  }
  void bias_backward(float* dbias, const void* dout, int N, int OC) override {
    void* s = scratch("bias_backward", cuda::matmul_backward_scratch_bytes(OC));
    cuda::bias_backward(dbias, H(dout), N, OC, s, stream_);
  }
  void classifier_slice_stats(float* maxes, float* target, const void* logits, const int* targets, int lo, int valid,
                              int N, int Vs, int V) override {
    cuda::classifier_slice_stats(maxes, target, H(logits), targets, lo, valid, N, Vs, V, stream_);
  }
  void classifier_slice_sumexp(float* sums, const void* logits, const float* maxes, int valid, int N,
                               int Vs) override {
    cuda::classifier_slice_sumexp(sums, H(logits), maxes, valid, N, Vs, stream_);
  }
  void classifier_slice_backward(void* logits_to_dlogits, float* losses, double* loss_sum, const float* maxes,
                                 const float* sums, const float* target, const int* targets, int lo, int valid,
                                 float dloss, int N, int Vs) override {
    cuda::classifier_slice_backward(H(logits_to_dlogits), losses, loss_sum, maxes, sums, target, targets, lo, valid,
                                    dloss, N, Vs, stream_);
  }

  void adamw_update(float* param, const float* grad, float* m, float* v, void* param_out, size_t n,
                    const AdamWParams& hp) override {
    cuda::adamw_update(param, grad, m, v, static_cast<bf16*>(param_out), n, hp, stream_);
  }
  // The kernels' own wait then covers only their reduction: what came before (collectives) is polled first.
  double sum_squares(const float* x, size_t n) override {
    cuda::wait_stream(stream_, "the gradient norm");
    return cuda::sum_squares(x, n, scratch("sum_squares", cuda::sum_squares_scratch_bytes()), stream_);
  }
  double sum_squares_all(const float* const* xs, const size_t* ns, int count) override {
    cuda::wait_stream(stream_, "the gradient norm");
    return cuda::sum_squares_all(xs, ns, count, scratch("sum_squares_all", cuda::sum_squares_scratch_bytes()),
                                 stream_);
  }
  void accumulate_f32(float* y, const float* x, size_t n, float divisor) override {
    cuda::accumulate_f32(y, x, n, divisor, stream_);
  }

 protected:
  void* raw_alloc(size_t bytes) override {
    void* p = nullptr;
    const cudaError_t e = cudaMalloc(&p, bytes);
    if (e == cudaErrorMemoryAllocation) {
      (void)cudaGetLastError();  // not sticky: clear it, Backend::alloc reports the failure
      return nullptr;
    }
    CUDA_CHECK(e);
    live_allocations_++;
    return p;
  }
  // Frees wait for queued work first: nothing in flight may still use the block.
  void raw_free(void* p) override {
    if (cuda_device_lost()) return;  // the context is gone, and its memory with it: nothing to wait for
    synchronize();  // both streams: no op or copy in flight may still use the block
    CUDA_CHECK(cudaFree(p));
    live_allocations_--;
  }
  void* raw_alloc_host(size_t bytes) override {
    void* p = nullptr;
    const cudaError_t e = cudaMallocHost(&p, bytes);
    if (e == cudaErrorMemoryAllocation) {
      (void)cudaGetLastError();
      return nullptr;
    }
    CUDA_CHECK(e);
    return p;
  }
  void raw_free_host(void* p) override {
    if (cuda_device_lost()) return;
    synchronize();
    CUDA_CHECK(cudaFreeHost(p));
  }

 private:
  // A copy to pageable host memory returns only when it is done: the work before it is polled first, so the
  // host never blocks in the driver behind a collective.
  void copy(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind) {
    if (!bytes) return;
    if (kind == cudaMemcpyDeviceToHost) cuda::wait_stream(stream_, "a copy to the host");
    CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, kind, stream_));
  }

  // The scratch block for `op`, which needs `bytes`. Once reserve_workspace has run it never grows.
  void* scratch(const char* op, size_t bytes) {
    if (bytes <= scratch_bytes_) return scratch_;
    GPT_CHECK(!reserved_, "cuda ", op, ": needs ", bytes, " bytes of scratch but the workspace reserved by ",
              "reserve_workspace holds ", scratch_bytes_, " (reserved for smaller shapes, or before the attention ",
              "path changed); ops inside a step must not allocate");
    grow_scratch(bytes);
    return scratch_;
  }
  // The cudnn path's plans for the shape, built here so that no step builds one, and their workspace. With
  // --attention auto, a shape cuDNN cannot plan switches to the path auto takes without cuDNN, on stderr.
  cuda::CudnnPlanWorkspace plan_cudnn_attention(int B, int T, int C, int NH) {
    if (attention_ != AttentionPath::cudnn) return {};
#ifdef GPT_WITH_CUDNN
    try {
      return cudnn_->plan(B, T, C, NH);
    } catch (const Error& e) {
      if (!attention_automatic_) throw;
      attention_ = attention_fallback_without_cudnn(C, NH);
      std::fprintf(stderr, "warning: --attention auto: %s; using --attention %s\n", e.what(),
                   attention_path_name(attention_));
    }
#endif
    return {};
  }

  // Replaces the scratch with a larger block; the free waits for the stream before the old block goes.
  void grow_scratch(size_t bytes) {
    if (scratch_) {
      free(scratch_);  // raw_free synchronizes the stream first
      scratch_ = nullptr;
      scratch_bytes_ = 0;
    }
    scratch_ = alloc(bytes, MemCat::workspace);
    scratch_bytes_ = bytes;
  }

  int64_t device_memory_free() const {
    size_t free_bytes = 0, total_bytes = 0;
    CUDA_CHECK(cudaSetDevice(device_));
    CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
    return static_cast<int64_t>(free_bytes);
  }
  // Device bytes in use on this GPU as the driver counts them (every process's, hence the baseline).
  int64_t driver_in_use() const {
    size_t free_bytes = 0, total_bytes = 0;
    CUDA_CHECK(cudaSetDevice(device_));
    CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
    return static_cast<int64_t>(total_bytes - free_bytes);
  }

  // Destructor-safe free (no throw).
  void release(void* p) {
    if (!p) return;
    ledger().on_free(p);
    cudaFree(p);
    live_allocations_--;
  }

  int device_ = 0;
  AttentionPath attention_ = AttentionPath::simple;  // --attention, resolved (src/runtime)
  bool attention_automatic_ = false;                // resolved from auto: may fall back (plan_cudnn_attention)
#ifdef GPT_WITH_CUDNN
  std::unique_ptr<cuda::CudnnAttention> cudnn_;  // the cudnn path's handle and plans, made when it is chosen
#endif
  cudaStream_t stream_ = nullptr;
  // The copy streams, [0] host -> device and [1] device -> host (created after cudaSetDevice, so on this device),
  // and the trace's clocks on the compute stream and on each of them.
  std::unique_ptr<cuda::CopyStream> copy_[2];
  std::unique_ptr<cuda::EventClock> compute_clock_, copy_clock_[2];
  cuda::BlasContext blas_;
  void* scratch_ = nullptr;
  size_t scratch_bytes_ = 0;
  bool reserved_ = false;          // reserve_workspace ran: the scratch may no longer grow
  int64_t live_allocations_ = 0;   // device blocks from raw_alloc not yet freed
  int64_t baseline_in_use_ = 0;    // driver_in_use() at construction
  mutable Info info_{*this};
};

}  // namespace

std::unique_ptr<Backend> make_cuda_backend(int local_rank) { return std::make_unique<CudaBackend>(local_rank); }

namespace {
CudaBackend& as_cuda(Backend& backend, const char* what) {
  auto* cuda = dynamic_cast<CudaBackend*>(&backend);
  GPT_CHECK(cuda, what, ": needs the cuda backend, got the ", backend.name(), " backend");
  return *cuda;
}
}  // namespace

cudaStream_t cuda_compute_stream(Backend& backend) { return as_cuda(backend, "cuda_compute_stream").stream(); }
int cuda_backend_device(Backend& backend) { return as_cuda(backend, "cuda_backend_device").device(); }
CudaMemoryCheck cuda_memory_check(Backend& backend) { return as_cuda(backend, "cuda_memory_check").memory_check(); }
size_t cuda_gemm_plan_count(Backend& backend) { return as_cuda(backend, "cuda_gemm_plan_count").gemm_plan_count(); }

size_t cuda_cudnn_plan_count(Backend& backend) {
#ifdef GPT_WITH_CUDNN
  return as_cuda(backend, "cuda_cudnn_plan_count").cudnn_plan_count();
#else
  (void)as_cuda(backend, "cuda_cudnn_plan_count");
  return 0;
#endif
}

}  // namespace gpt
