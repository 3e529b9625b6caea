// The CUDA backend: bf16 compute dtype, one compute stream that every op and copy is queued on, one
// cuBLASLt handle with a 32 MiB workspace, and one growable scratch block for ops with temporaries
// (attention's head-major copies and (T,T) matrices, the deterministic gradient reductions). The scratch
// grows only when an op needs more than it has (in practice during the first step), after waiting for the
// stream, so no op ever sees its scratch freed under it. Both blocks are tagged "workspace" in the ledger.
//
// Device choice: under mpirun (OMPI_COMM_WORLD_LOCAL_RANK set) rank r uses GPU r % count; otherwise the
// current device. cuda_backend.h exposes the compute stream and that device to the NCCL communicator.
#include <cstdlib>
#include <memory>

#include "backend/backend.h"
#include "backend/cuda/cuda_backend.h"
#include "cuda/ops.cuh"

namespace gpt {
namespace {

using cuda::bf16;

constexpr size_t kCublasWorkspaceBytes = 32u << 20;

__global__ void f32_to_bf16_kernel(bf16* dst, const float* src, size_t n) {
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x)
    dst[i] = cuda::to_bf16(src[i]);
}

__global__ void bf16_to_f32_kernel(float* dst, const bf16* src, size_t n) {
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x)
    dst[i] = cuda::to_f32(src[i]);
}

bf16* H(void* p) { return static_cast<bf16*>(p); }
const bf16* H(const void* p) { return static_cast<const bf16*>(p); }

int pick_device() {
  int count = 0;
  CUDA_CHECK(cudaGetDeviceCount(&count));
  GPT_CHECK(count > 0, "--device cuda: no CUDA GPU is visible (use --device cpu)");
  if (const char* local = std::getenv("OMPI_COMM_WORLD_LOCAL_RANK")) return std::atoi(local) % count;
  int dev = 0;
  CUDA_CHECK(cudaGetDevice(&dev));
  return dev;
}

class CudaBackend final : public Backend {
 public:
  CudaBackend() : device_(pick_device()) {
    CUDA_CHECK(cudaSetDevice(device_));
    CUDA_CHECK(cudaStreamCreate(&stream_));
    CUBLAS_CHECK(cublasLtCreate(&blas_.handle));
    blas_.workspace = alloc(kCublasWorkspaceBytes, MemCat::workspace);
    blas_.workspace_bytes = kCublasWorkspaceBytes;
  }
  ~CudaBackend() override {
    cudaStreamSynchronize(stream_);  // no throwing in a destructor: errors here are ignored
    release(scratch_);
    release(blas_.workspace);
    if (blas_.handle) cublasLtDestroy(blas_.handle);
    if (stream_) cudaStreamDestroy(stream_);
  }

  std::string name() const override { return "cuda"; }
  cudaStream_t stream() const { return stream_; }
  int device() const { return device_; }
  DType compute_dtype() const override { return DType::BF16; }

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
  void synchronize() override { CUDA_CHECK(cudaStreamSynchronize(stream_)); }

  void f32_to_compute(void* dst, const float* src, size_t n) override {
    if (n == 0) return;
    f32_to_bf16_kernel<<<cuda::grid_for(n, 256), 256, 0, stream_>>>(H(dst), src, n);
    CUDA_CHECK_LAUNCH();
  }
  void compute_to_f32(float* dst, const void* src, size_t n) override {
    if (n == 0) return;
    bf16_to_f32_kernel<<<cuda::grid_for(n, 256), 256, 0, stream_>>>(dst, H(src), n);
    CUDA_CHECK_LAUNCH();
  }

  void encoder_forward(void* out, const int* tokens, const void* wte, const void* wpe, int B, int T,
                       int C) override {
    cuda::encoder_forward(H(out), tokens, H(wte), H(wpe), B, T, C, stream_);
  }
  void encoder_backward(float* dwte, float* dwpe, const void* dout, const int* tokens, int B, int T,
                        int C) override {
    cuda::encoder_backward(dwte, dwpe, H(dout), tokens, B, T, C, stream_);
  }

  void layernorm_forward(void* out, float* mean, float* rstd, const void* inp, const void* w, const void* b,
                         int N, int C) override {
    cuda::layernorm_forward(H(out), mean, rstd, H(inp), H(w), H(b), N, C, stream_);
  }
  void layernorm_backward(void* dinp, float* dw, float* db, const void* dout, const void* inp, const void* w,
                          const float* mean, const float* rstd, int N, int C) override {
    void* s = scratch(cuda::layernorm_backward_scratch_bytes(N, C));
    cuda::layernorm_backward(H(dinp), dw, db, H(dout), H(inp), H(w), mean, rstd, N, C, s, stream_);
  }

  void matmul_forward(void* out, const void* inp, const void* w, const void* bias, int N, int C,
                      int OC) override {
    cuda::matmul_forward(H(out), H(inp), H(w), H(bias), N, C, OC, blas_, stream_);
  }
  void matmul_backward(void* dinp, float* dw, float* dbias, const void* dout, const void* inp, const void* w,
                       int N, int C, int OC) override {
    void* s = dbias ? scratch(cuda::matmul_backward_scratch_bytes(N, OC)) : nullptr;
    cuda::matmul_backward(H(dinp), dw, dbias, H(dout), H(inp), H(w), N, C, OC, blas_, s, stream_);
  }

  size_t attention_state_bytes(int B, int T, int NH) const override {
    return cuda::attention_state_bytes(B, T, NH);
  }
  void attention_forward(void* out, void* state, const void* qkv, int B, int T, int C, int NH) override {
    void* s = scratch(cuda::attention_scratch_bytes(B, T, C, NH));
    cuda::attention_forward(H(out), H(state), H(qkv), B, T, C, NH, blas_, s, stream_);
  }
  void attention_backward(void* dqkv, const void* dout, const void* qkv, const void* out, const void* state,
                          int B, int T, int C, int NH) override {
    void* s = scratch(cuda::attention_scratch_bytes(B, T, C, NH));
    cuda::attention_backward(H(dqkv), H(dout), H(qkv), H(out), H(state), B, T, C, NH, blas_, s, stream_);
  }

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
  void classifier_backward(void* logits_to_dlogits, float* losses, const int* targets, float dloss, int N,
                           int V, int Vp) override {
    cuda::classifier_backward(H(logits_to_dlogits), losses, targets, dloss, N, V, Vp, stream_);
  }

  void adamw_update(float* param, const float* grad, float* m, float* v, size_t n,
                    const AdamWParams& hp) override {
    cuda::adamw_update(param, grad, m, v, n, hp, stream_);
  }
  double sum_squares(const float* x, size_t n) override {
    return cuda::sum_squares(x, n, scratch(cuda::sum_squares_scratch_bytes()), stream_);
  }
  void accumulate_f32(float* y, const float* x, size_t n) override { cuda::accumulate_f32(y, x, n, stream_); }

 protected:
  void* raw_alloc(size_t bytes) override {
    void* p = nullptr;
    const cudaError_t e = cudaMalloc(&p, bytes);
    if (e == cudaErrorMemoryAllocation) {
      (void)cudaGetLastError();  // not sticky: clear it, Backend::alloc reports the failure
      return nullptr;
    }
    CUDA_CHECK(e);
    return p;
  }
  // Frees wait for queued work first: nothing in flight may still use the block.
  void raw_free(void* p) override {
    CUDA_CHECK(cudaStreamSynchronize(stream_));
    CUDA_CHECK(cudaFree(p));
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
    CUDA_CHECK(cudaStreamSynchronize(stream_));
    CUDA_CHECK(cudaFreeHost(p));
  }

 private:
  void copy(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind) {
    if (bytes) CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, kind, stream_));
  }

  // A scratch block of at least `bytes`; growing it waits for the stream before the old block goes.
  void* scratch(size_t bytes) {
    if (bytes <= scratch_bytes_) return scratch_;
    if (scratch_) {
      free(scratch_);  // raw_free synchronizes the stream first
      scratch_ = nullptr;
      scratch_bytes_ = 0;
    }
    scratch_ = alloc(bytes, MemCat::workspace);
    scratch_bytes_ = bytes;
    return scratch_;
  }

  // Destructor-safe free (no throw).
  void release(void* p) {
    if (!p) return;
    ledger().on_free(p);
    cudaFree(p);
  }

  int device_ = 0;
  cudaStream_t stream_ = nullptr;
  cuda::BlasContext blas_;
  void* scratch_ = nullptr;
  size_t scratch_bytes_ = 0;
};

}  // namespace

bool cuda_device_visible() {
  int count = 0;
  const cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();  // no driver or no device: not an error here, just "not visible"
    return false;
  }
  return count > 0;
}

std::unique_ptr<Backend> make_cuda_backend() { return std::make_unique<CudaBackend>(); }

namespace {
CudaBackend& as_cuda(Backend& backend, const char* what) {
  auto* cuda = dynamic_cast<CudaBackend*>(&backend);
  GPT_CHECK(cuda, what, ": needs the cuda backend, got the ", backend.name(), " backend");
  return *cuda;
}
}  // namespace

cudaStream_t cuda_compute_stream(Backend& backend) { return as_cuda(backend, "cuda_compute_stream").stream(); }
int cuda_backend_device(Backend& backend) { return as_cuda(backend, "cuda_backend_device").device(); }

}  // namespace gpt
