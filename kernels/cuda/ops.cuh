// The CUDA twins of kernels/cpu: one function per Backend op, same argument order as the Backend method,
// typed pointers (bf16 for the compute dtype, float for fp32 buffers), then what the GPU needs besides:
// the cuBLASLt context for matrix products, a scratch block for ops with temporaries, and the stream.
// Every function only enqueues work on `stream` (sum_squares and sum_squares_all excepted: they return a
// host value).
//
// Scratch: an op that needs temporaries says how many bytes through its *_scratch_bytes function
// (kernels/sizes.h) and receives a device block at least that long; the content need not survive between
// calls.
#pragma once
#include <cstddef>
#include <unordered_map>

#include "kernels/adamw_params.h"
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/gemm_key.h"
#include "kernels/sizes.h"

namespace gpt::cuda {

// One planned product (matmul.cu): the cuBLASLt descriptors of its shape and the algorithm the heuristic
// chose for them. Owns the descriptors (move-only); pointers, including the bias, are set per call.
struct GemmPlan {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr;
  cublasLtMatmulAlgo_t algo{};
  bool supported = true;  // false: the heuristic found no algorithm (kept, so it is asked once per shape)
  GemmPlan() = default;
  GemmPlan(GemmPlan&& o) noexcept;
  GemmPlan(const GemmPlan&) = delete;
  GemmPlan& operator=(const GemmPlan&) = delete;
  GemmPlan& operator=(GemmPlan&&) = delete;
  ~GemmPlan();
};

// cuBLASLt handle and its workspace, created once per backend, and the plans of the products run so far
// (one per GemmKey, filled on first use: the heuristic runs once per shape, not once per call). The plans
// are a cache, hence mutable; the backend clears them before destroying the handle.
struct BlasContext {
  cublasLtHandle_t handle = nullptr;
  void* workspace = nullptr;
  size_t workspace_bytes = 0;
  mutable std::unordered_map<GemmKey, GemmPlan, GemmKeyHash> plans;
};

// One (optionally batched) product written in ROW-MAJOR terms:
//   C (M x N) = alpha * op(A) (M x K) @ op(B) (K x N) + beta * C  [+ bias[n] on every row]
// A, B are bf16; C is bf16 (c_f32 false) or fp32 (c_f32 true). trans_a means A is stored K x M
// (op(A) = A^T), likewise trans_b means B is stored N x K. lda/ldb/ldc are row strides in elements.
// Batches: batch matrices at A + i*stride_a, B + i*stride_b, C + i*stride_c (elements).
// bias (bf16, length N) is only allowed with a bf16 C and batch 1.
struct GemmSpec {
  int M = 0, N = 0, K = 0;
  const bf16* A = nullptr;
  int lda = 0;
  bool trans_a = false;
  long long stride_a = 0;
  const bf16* B = nullptr;
  int ldb = 0;
  bool trans_b = false;
  long long stride_b = 0;
  void* C = nullptr;
  int ldc = 0;
  bool c_f32 = false;
  long long stride_c = 0;
  int batch = 1;
  float alpha = 1.0f;
  float beta = 0.0f;
  const bf16* bias = nullptr;
  // With a bias only: C = gelu(product + bias) (tanh GELU, cuBLASLt's GELU_AUX_BIAS epilogue) and
  // gelu_aux (same layout and ldc as C, bf16) = product + bias, the pre-activation backward needs.
  bf16* gelu_aux = nullptr;
  // Without a bias only: C = gelu'(dgelu_aux) * product (cuBLASLt's DGELU epilogue), dgelu_aux the GELU's
  // input (same layout and ldc as C, bf16): the backward of a GELU folded into the product after it.
  const bf16* dgelu_aux = nullptr;
};
void gemm(const BlasContext& ctx, const GemmSpec& g, cudaStream_t stream);
// As gemm, but returns false (running nothing) when cuBLASLt has no algorithm for the product instead of
// failing: for optional fusions (the GELU epilogue) that have a plain fallback.
bool try_gemm(const BlasContext& ctx, const GemmSpec& g, cudaStream_t stream);

// ---- encoder.cu -------------------------------------------------------------------------------
void encoder_forward(bf16* out /*(B,T,C)*/, const int* tokens /*(B,T)*/, const bf16* wte /*(Vp,C)*/,
                     const bf16* wpe /*(maxT,C)*/, int B, int T, int C, cudaStream_t stream);
// Deterministic (no atomics): scratch is encoder_backward_scratch_bytes(B*T) (kernels/sizes.h).
void encoder_backward(float* dwte /*(Vp,C) +=*/, float* dwpe /*(maxT,C) +=*/, const bf16* dout /*(B,T,C)*/,
                      const int* tokens /*(B,T)*/, int B, int T, int C, void* scratch, cudaStream_t stream);
// The tensor-parallel pieces of the same op (Backend's section): the lookup of the tokens in wte rows
// [lo, lo + rows) (zero rows for the others), its gradient (encoder_backward's dwte over the slice: the same
// sort and scratch, encoder_backward_scratch_bytes(N)), and the position embedding of n grid rows from `first`
// and its gradient (encoder_backward's dwpe over the range, no scratch). Over the whole vocabulary and all rows
// they give encoder_forward's out and encoder_backward's gradients bit for bit.
void embedding_slice_forward(bf16* out /*(N,C)*/, const int* tokens /*(N)*/, const bf16* wte_rows /*(rows,C)*/, int lo,
                             int rows, int N, int C, cudaStream_t stream);
void embedding_slice_backward(float* dwte_rows /*(rows,C) +=*/, const bf16* dout /*(N,C)*/, const int* tokens /*(N)*/,
                              int lo, int rows, int N, int C, void* scratch, cudaStream_t stream);
void position_forward(bf16* x /*(n,C) +=*/, const bf16* wpe /*(maxT,C)*/, int first, int n, int T, int C,
                      cudaStream_t stream);
void position_backward(float* dwpe /*(maxT,C) +=*/, const bf16* dout /*(n,C)*/, int first, int n, int T, int C,
                       cudaStream_t stream);

// ---- layernorm.cu -----------------------------------------------------------------------------
void layernorm_forward(bf16* out /*(N,C)*/, float* mean /*(N)*/, float* rstd /*(N)*/, const bf16* inp /*(N,C)*/,
                       const bf16* w /*(C)*/, const bf16* b /*(C)*/, int N, int C, cudaStream_t stream);
// res = a + b, out = layernorm(res): bit-identical to residual_forward then layernorm_forward.
void residual_layernorm_forward(bf16* res /*(N,C)*/, bf16* out /*(N,C)*/, float* mean /*(N)*/, float* rstd /*(N)*/,
                                const bf16* a /*(N,C)*/, const bf16* b /*(N,C)*/, const bf16* w /*(C)*/,
                                const bf16* bias /*(C)*/, int N, int C, cudaStream_t stream);
// Scratch: layernorm_backward_scratch_bytes(C) (kernels/sizes.h), for both backward ops.
void layernorm_backward(bf16* dinp /*(N,C) =*/, float* dw /*(C) +=*/, float* db /*(C) +=*/,
                        const bf16* dout /*(N,C)*/, const bf16* inp /*(N,C)*/, const bf16* w /*(C)*/,
                        const float* mean /*(N)*/, const float* rstd /*(N)*/, int N, int C, void* scratch,
                        cudaStream_t stream);
// dres += the layernorm's input gradient (fp32, rounded once with the sum). dres must not overlap dout, inp.
void layernorm_backward_residual(bf16* dres /*(N,C) +=*/, float* dw /*(C) +=*/, float* db /*(C) +=*/,
                                 const bf16* dout /*(N,C)*/, const bf16* inp /*(N,C)*/, const bf16* w /*(C)*/,
                                 const float* mean /*(N)*/, const float* rstd /*(N)*/, int N, int C, void* scratch,
                                 cudaStream_t stream);

// ---- matmul.cu ----------------------------------------------------------------------------------
// The bias goes in cuBLASLt's epilogue when it can be read safely (OC % 8 == 0 and a 16-byte aligned bias:
// bias_epilogue_ok); otherwise the product runs without it and a kernel adds it (one more bf16 rounding).
void matmul_forward(bf16* out /*(N,OC)*/, const bf16* inp /*(N,C)*/, const bf16* w /*(OC,C)*/,
                    const bf16* bias /*(OC) or null*/, int N, int C, int OC, const BlasContext& ctx,
                    cudaStream_t stream);
bool bias_epilogue_ok(const bf16* bias, int OC);
// x (N,OC) += bias (OC) on every row, in fp32, rounded once: the fallback of the bias epilogue, and the bias of a
// row-parallel product added after the reduction of its partial products (tensor parallelism).
void bias_forward(bf16* x, const bf16* bias, int N, int OC, cudaStream_t stream);
// dbias (OC) += the column sums of dout (N,OC): matmul_backward's deterministic reduction (row chunks in a fixed
// order), scratch matmul_backward_scratch_bytes(OC).
void bias_backward(float* dbias, const bf16* dout, int N, int OC, void* scratch, cudaStream_t stream);
// out = gelu(inp @ w^T + bias), pre = inp @ w^T + bias: one product with the GELU epilogue where cuBLASLt
// has it for the shape, else the product then the gelu kernel (the same values up to the epilogue's fp32
// GELU of the unrounded pre-activation).
void matmul_gelu_forward(bf16* out /*(N,OC)*/, bf16* pre /*(N,OC)*/, const bf16* inp /*(N,C)*/, const bf16* w /*(OC,C)*/,
                         const bf16* bias /*(OC)*/, int N, int C, int OC, const BlasContext& ctx, cudaStream_t stream);
void matmul_backward(bf16* dinp /*(N,C) = or null*/, float* dw /*(OC,C) +=*/, float* dbias /*(OC) += or null*/,
                     const bf16* dout /*(N,OC)*/, const bf16* inp /*(N,C)*/, const bf16* w /*(OC,C)*/, int N,
                     int C, int OC, const BlasContext& ctx, void* scratch, cudaStream_t stream);
// The backward of out = gelu(pre) @ w^T + bias through the GELU: dpre = gelu'(pre) * (dout @ w) in one
// product with cuBLASLt's DGELU epilogue where it has the shape (C % 8 == 0, pre and dpre 16-byte
// aligned), else the product and then gelu_backward in place; dw and dbias as matmul_backward (inp is
// gelu(pre)). Scratch as matmul_backward.
void gelu_matmul_backward(bf16* dpre /*(N,C) =*/, float* dw /*(OC,C) +=*/, float* dbias /*(OC) += or null*/,
                          const bf16* dout /*(N,OC)*/, const bf16* inp /*(N,C)*/, const bf16* pre /*(N,C)*/,
                          const bf16* w /*(OC,C)*/, int N, int C, int OC, const BlasContext& ctx, void* scratch,
                          cudaStream_t stream);

// ---- attention.cu -------------------------------------------------------------------------------
// State kept from forward to backward: the softmax probabilities P (B,NH,T,T) in bf16 (the exact values the
// forward multiplied with V, so backward differentiates the function forward computed).
void attention_forward(bf16* out /*(B,T,C)*/, bf16* state /*(B,NH,T,T)*/, const bf16* qkv /*(B,T,3C)*/, int B,
                       int T, int C, int NH, const BlasContext& ctx, void* scratch, cudaStream_t stream);
void attention_backward(bf16* dqkv /*(B,T,3C) =*/, const bf16* dout /*(B,T,C)*/, const bf16* qkv /*(B,T,3C)*/,
                        const bf16* out /*(B,T,C)*/, const bf16* state /*(B,NH,T,T)*/, int B, int T, int C,
                        int NH, const BlasContext& ctx, void* scratch, cudaStream_t stream);
// Over a key/value cache (sampling): k and v of the Tn new positions go into the caches at past.., then each
// new query attends over positions 0..its own, in fp32 (one block per query and head, keys in tiles with a
// running max and sum). Head sizes up to kCachedAttentionMaxHs (kernels/sizes.h).
void attention_cached_forward(bf16* out /*(B,Tn,C)*/, bf16* kcache /*(B,NH,Tmax,hs)*/, bf16* vcache /*(B,NH,Tmax,hs)*/,
                              const bf16* qkv /*(B,Tn,3C)*/, int B, int Tn, int past, int Tmax, int C, int NH,
                              cudaStream_t stream);

// ---- attention_fused.cu -------------------------------------------------------------------------
// The fused (flash-style) path of the same op: state is the row log-sum-exp (B,NH,T) fp32, scratch the
// softmax-gradient row terms (B,NH,T) fp32. Head sizes 32 and 64 (every GPT-2 preset has 64).
void fused_attention_forward(bf16* out /*(B,T,C)*/, float* lse /*(B,NH,T)*/, const bf16* qkv /*(B,T,3C)*/, int B,
                             int T, int C, int NH, cudaStream_t stream);
void fused_attention_backward(bf16* dqkv /*(B,T,3C) =*/, const bf16* dout /*(B,T,C)*/, const bf16* qkv /*(B,T,3C)*/,
                              const bf16* out /*(B,T,C)*/, const float* lse /*(B,NH,T)*/, int B, int T, int C,
                              int NH, void* scratch, cudaStream_t stream);

// ---- gelu.cu ------------------------------------------------------------------------------------
void gelu_forward(bf16* out, const bf16* inp, size_t n, cudaStream_t stream);
void gelu_backward(bf16* dinp /*=, may be dout*/, const bf16* inp, const bf16* dout, size_t n, cudaStream_t stream);

// ---- residual.cu ------------------------------------------------------------------------------
void residual_forward(bf16* out, const bf16* a, const bf16* b, size_t n, cudaStream_t stream);
void residual_backward(bf16* dstream /*+=*/, const bf16* dbranch, size_t n, cudaStream_t stream);
// x[i] += table[(first + i) % period] for the n rows of x, in fp32, rounded once: the position embedding of a row
// range (table wpe, period T) and a bias (a table of one row, period 1). 16-byte accesses when C % 8 == 0 and x
// and table are 16-byte aligned.
void add_table_rows(bf16* x /*(n,C) +=*/, const bf16* table /*(period,C)*/, int first, int n, int period, int C,
                    cudaStream_t stream);

// ---- classifier.cu ------------------------------------------------------------------------------
// A target outside [0, V) yields a NaN loss (and no one-hot term) instead of reading out of bounds.
void classifier_forward(float* losses /*(N)*/, const bf16* logits /*(N,Vp)*/, const int* targets /*(N)*/, int N,
                        int V, int Vp, cudaStream_t stream);
// One pass over the logits: losses, and dlogits in place; then, when loss_sum is not null, one small
// kernel adds the N losses (fp64, a fixed order) to *loss_sum.
void classifier_backward(bf16* logits_to_dlogits /*(N,Vp)*/, float* losses /*(N)*/, double* loss_sum /*(1) +=*/,
                         const int* targets /*(N)*/, float dloss, int N, int V, int Vp, cudaStream_t stream);
// The vocab-parallel cross-entropy over this rank's Vs columns, the first `valid` real (Backend::classifier_slice_*):
// one block per row, the classifier's passes and exponentials, one pass per op. stats: a target outside [0, V)
// gives a NaN target logit (so a NaN loss), as classifier_forward does. backward: the losses, and the dlogits in
// place when logits_to_dlogits is not null; then, when loss_sum is not null, classifier_backward's loss total.
void classifier_slice_stats(float* maxes /*(N)*/, float* target /*(N)*/, const bf16* logits /*(N,Vs)*/,
                            const int* targets /*(N)*/, int lo, int valid, int N, int Vs, int V, cudaStream_t stream);
void classifier_slice_sumexp(float* sums /*(N)*/, const bf16* logits /*(N,Vs)*/, const float* maxes /*(N)*/, int valid,
                             int N, int Vs, cudaStream_t stream);
void classifier_slice_backward(bf16* logits_to_dlogits /*(N,Vs) or null*/, float* losses /*(N)*/,
                               double* loss_sum /*(1) += or null*/, const float* maxes /*(N)*/,
                               const float* sums /*(N)*/, const float* target /*(N)*/, const int* targets /*(N)*/,
                               int lo, int valid, float dloss, int N, int Vs, cudaStream_t stream);

// ---- adamw.cu ---------------------------------------------------------------------------------
// param_out (n) bf16 or null: receives the updated parameters rounded to bf16, in the same pass.
void adamw_update(float* param, const float* grad, float* m, float* v, bf16* param_out, size_t n,
                  const AdamWParams& hp, cudaStream_t stream);
// Wait for the stream (the result is a host value). sum_squares_all: the sums of squares of count buffers
// (xs[i], ns[i] elements), added in index order; one host wait per kSumSquaresSlots buffers.
double sum_squares(const float* x, size_t n, void* scratch, cudaStream_t stream);
double sum_squares_all(const float* const* xs, const size_t* ns, int count, void* scratch, cudaStream_t stream);
void accumulate_f32(float* y /*(n) +=*/, const float* x /*(n)*/, size_t n, float divisor, cudaStream_t stream);

}  // namespace gpt::cuda
