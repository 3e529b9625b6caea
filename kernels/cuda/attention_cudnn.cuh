// The cudnn path of causal self-attention: cuDNN's fused flash attention, driven through the backend
// descriptors of its graph API (attention_cudnn_graph.cu builds the graphs and plans), with the plans cached
// per shape and run by attention_cudnn.cu. Only in builds with cuDNN (GPT_WITH_CUDNN);
// kernels/attention_rules.h says which models and GPUs it takes, kernels/sizes.h what it keeps and needs
// (cudnn_attention_*), kernels/cuda/attention_cudnn_key.h how our packed tensors are shown to cuDNN.
#pragma once
#include "kernels/attention_rules.h"
#include "kernels/cuda/common.cuh"
#include "kernels/sizes.h"

#ifdef GPT_WITH_CUDNN
#include <cstddef>
#include <memory>

namespace gpt::cuda {

// One cuDNN handle (bound to the backend's compute stream) and the execution plans built so far, one per
// SdpaKey (direction and shape). Forward keeps the row log-sum-exp (B, NH, T) fp32 as the attention state;
// backward reads it back with q, k, v, out and dout.
class CudnnAttention {
 public:
  explicit CudnnAttention(cudaStream_t stream);  // on the current device
  ~CudnnAttention();
  CudnnAttention(const CudnnAttention&) = delete;
  CudnnAttention& operator=(const CudnnAttention&) = delete;

  // Builds (or finds) the forward and backward plans of (B, T, C, NH) and returns their workspace sizes, for
  // the scratch reservation (cudnn_attention_scratch_bytes). Throws gpt::Error, naming the cuDNN call and
  // status, when cuDNN cannot plan the shape on this GPU. Zero sizes, and no plans, for T = 1 (closed form).
  CudnnPlanWorkspace plan(int B, int T, int C, int NH);
  // scratch: at least cudnn_attention_scratch_bytes(B, T, C, NH, plan(B, T, C, NH)) bytes, 256-aligned.
  void forward(bf16* out /*(B,T,C)*/, float* lse /*(B,NH,T)*/, const bf16* qkv /*(B,T,3C)*/, int B, int T, int C,
               int NH, void* scratch, size_t scratch_bytes, cudaStream_t stream);
  void backward(bf16* dqkv /*(B,T,3C) =*/, const bf16* dout /*(B,T,C)*/, const bf16* qkv /*(B,T,3C)*/,
                const bf16* out /*(B,T,C)*/, const float* lse /*(B,NH,T)*/, int B, int T, int C, int NH, void* scratch,
                size_t scratch_bytes, cudaStream_t stream);
  size_t plan_count() const;  // plans cached (forward and backward count apart)

  // The facts attention_rules.h decides by, for GPU `device` and the cuDNN library loaded.
  static CudnnAttentionTarget target(int device);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace gpt::cuda
#endif  // GPT_WITH_CUDNN
