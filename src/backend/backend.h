// The backend interface: memory (through the ledger) and one forward and one backward method per op.
// The model (src/model) is written once against this interface; kernels/cpu and kernels/cuda implement it.
//
// Conventions every implementation follows:
//  - `void*` buffers hold the backend's compute dtype (compute_dtype(): F32 on cpu, BF16 on cuda):
//    activations, activation gradients and gathered (full-unit) parameters.
//  - `float*` buffers are always fp32: parameter gradients (full-unit, before reduce-scatter), layernorm
//    statistics, per-token losses, master weights and optimizer state.
//  - Backward ops OVERWRITE activation gradients (dinp) and ACCUMULATE (+=) parameter gradients
//    (dw, db). The residual stream's gradient is summed explicitly, with residual_backward or with
//    layernorm_backward_residual (a layernorm's input gradient added straight into the stream).
//  - Shapes: B batch, T time, C channels, NH heads, N = B*T rows, OC output channels, V vocab, Vp padded.
//  - Every op is asynchronous with respect to the host on GPU backends (ordered on the compute stream);
//    synchronize() waits for all of them.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "kernels/adamw_params.h"
#include "kernels/attention_rules.h"
#include "kernels/sizes.h"
#include "src/backend/device_info.h"
#include "src/backend/ledger.h"
#include "src/core/dtype.h"

namespace gpt {

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string name() const = 0;  // for messages; decisions ask kind()
  virtual DeviceKind kind() const = 0;
  virtual DType compute_dtype() const = 0;
  size_t compute_size() const { return dtype_size(compute_dtype()); }

  // ---- memory ------------------------------------------------------------------------------
  // This backend's own memory, tagged in the ledger (the device domain; the host domain for the host side
  // of a device, make_host_backend). Memory is NOT zeroed.
  virtual void* alloc(size_t bytes, MemCat cat);
  // Host-domain allocation (pinned on GPU backends), tagged in the ledger. NOT zeroed.
  virtual void* alloc_host(size_t bytes, MemCat cat);
  virtual void free(void* p);       // pointer from alloc()
  virtual void free_host(void* p);  // pointer from alloc_host()
  // The host side of this backend (make_host_backend below): where offloaded model states live. The
  // simulated machine (src/sim) gives its own, whose ops are priced on the host's timeline.
  virtual std::unique_ptr<Backend> host_side();
  // The host writes `bytes` from host memory into a buffer from alloc_host (the model's pinned token
  // staging): a memcpy; the simulated machine, whose memory is not backed, touches nothing.
  virtual void host_write(void* dst /*alloc_host*/, const void* src, size_t bytes);
  virtual MemoryLedger& ledger() { return ledger_; }
  const MemoryLedger& ledger() const { return const_cast<Backend*>(this)->ledger(); }
  // The device as the run's reports and checks measure it (peak FLOP/s, driver memory): device_info.h.
  virtual DeviceInfo& device_info() const = 0;
  // Reserves the scratch that ops with temporaries need for the largest shapes a model runs (attention at
  // B, T, C, NH on the chosen path, whose cuDNN plans are built here on the cudnn path; layernorm backward
  // over B*T rows of C; the bias gradient of a matmul with up to max_bias_oc output channels), tagged
  // workspace, so no step allocates. Afterwards an op that needs more fails with
  // an error naming it; calling this again with larger shapes grows the reservation. No-op on cpu. tp: with
  // tensor parallelism over tp ranks the attention runs NH/tp heads of C/tp channels (the layernorms still C).
  virtual void reserve_workspace(int B, int T, int C, int NH, int max_bias_oc, int tp = 1) {}

  virtual void zero(void* p, size_t bytes) = 0;                          // device memory
  virtual void copy_d2d(void* dst, const void* src, size_t bytes) = 0;
  virtual void copy_h2d(void* dst, const void* src, size_t bytes) = 0;  // host -> device
  virtual void copy_d2h(void* dst, const void* src, size_t bytes) = 0;  // device -> host
  virtual void synchronize() = 0;  // waits for every op and copy, on every stream
  // The copy streams (offload traffic): a host<->device copy that overlaps compute on GPU backends, one stream
  // per direction (PCIe moves both ways at once). A copy starts after all work queued so far (its source is
  // written, its destination no longer read) and returns a ticket: wait_copy_device(t) makes work queued
  // afterwards wait for it without blocking the host; wait_copy_host(t) blocks the host until it is done
  // (before the host reads a device-to-host result). Copies of one direction complete in issue order; the two
  // directions are not ordered with each other, so what an upload writes is read by a download only after
  // wait_copy_device of the upload. Host buffers come from alloc_host (pinned). The cpu backend copies at
  // once (tickets are done).
  virtual uint64_t copy_h2d_async(void* dst, const void* src, size_t bytes);
  virtual uint64_t copy_d2h_async(void* dst, const void* src, size_t bytes);
  virtual void wait_copy_device(uint64_t ticket) {}
  virtual void wait_copy_host(uint64_t ticket) {}
  // Conversions between fp32 (master weights, host data) and the compute dtype, both on device.
  virtual void f32_to_compute(void* dst, const float* src, size_t n) = 0;
  virtual void compute_to_f32(float* dst, const void* src, size_t n) = 0;
  // fp32 <-> bf16 on device whatever the compute dtype (bf16 gradient reductions): rounding to nearest
  // even (NaN stays NaN), widening exactly. dst (n) bf16 words / fp32, src (n).
  virtual void f32_to_bf16(void* dst, const float* src, size_t n) = 0;
  virtual void bf16_to_f32(float* dst, const void* src, size_t n) = 0;

  // ---- ops (kernels/<backend>/<op>) -------------------------------------------------------------
  // encoder: out = wte[tokens] + wpe[t]
  virtual void encoder_forward(void* out /*(B,T,C)*/, const int* tokens /*(B,T) device*/,
                               const void* wte /*(Vp,C)*/, const void* wpe /*(maxT,C)*/, int B, int T,
                               int C) = 0;
  virtual void encoder_backward(float* dwte /*(Vp,C) +=*/, float* dwpe /*(maxT,C) +=*/,
                                const void* dout /*(B,T,C)*/, const int* tokens /*(B,T)*/, int B, int T,
                                int C) = 0;

  // layernorm over the last dim, eps 1e-5; mean and rstd saved for backward.
  virtual void layernorm_forward(void* out /*(N,C)*/, float* mean /*(N)*/, float* rstd /*(N)*/,
                                 const void* inp /*(N,C)*/, const void* w /*(C)*/, const void* b /*(C)*/,
                                 int N, int C) = 0;
  virtual void layernorm_backward(void* dinp /*(N,C) =*/, float* dw /*(C) +=*/, float* db /*(C) +=*/,
                                  const void* dout /*(N,C)*/, const void* inp /*(N,C)*/,
                                  const void* w /*(C)*/, const float* mean /*(N)*/,
                                  const float* rstd /*(N)*/, int N, int C) = 0;
  // The residual add and the layernorm after it, in one pass: res = a + b, out = layernorm(res) (res as
  // stored, in the compute dtype). The same values as residual_forward then layernorm_forward (bit-identical
  // on cpu and on cuda), so a recompute that re-runs only the layernorm from the kept res reproduces out.
  virtual void residual_layernorm_forward(void* res /*(N,C)*/, void* out /*(N,C)*/, float* mean /*(N)*/,
                                          float* rstd /*(N)*/, const void* a /*(N,C)*/, const void* b /*(N,C)*/,
                                          const void* w /*(C)*/, const void* bias /*(C)*/, int N, int C) = 0;
  // layernorm_backward whose input gradient is added into the residual stream's gradient: dres += dinp.
  // cpu: bit-identical to layernorm_backward then residual_backward; cuda: one pass, dinp not rounded to
  // bf16 before the addition. dres must not overlap dout or inp.
  virtual void layernorm_backward_residual(void* dres /*(N,C) +=*/, float* dw /*(C) +=*/, float* db /*(C) +=*/,
                                           const void* dout /*(N,C)*/, const void* inp /*(N,C)*/,
                                           const void* w /*(C)*/, const float* mean /*(N)*/,
                                           const float* rstd /*(N)*/, int N, int C) = 0;

  // matmul: out = inp @ w^T + bias (bias may be null)
  virtual void matmul_forward(void* out /*(N,OC)*/, const void* inp /*(N,C)*/, const void* w /*(OC,C)*/,
                              const void* bias /*(OC) or null*/, int N, int C, int OC) = 0;
  // The MLP's first layer: pre = inp @ w^T + bias and out = gelu(pre), both kept (backward needs pre).
  // cpu: matmul then gelu; cuda: one product with cuBLASLt's GELU epilogue (GELU of the fp32 accumulator,
  // so out may differ from gelu(bf16 pre) by a bf16 rounding), falling back to the two ops.
  virtual void matmul_gelu_forward(void* out /*(N,OC)*/, void* pre /*(N,OC)*/, const void* inp /*(N,C)*/,
                                   const void* w /*(OC,C)*/, const void* bias /*(OC)*/, int N, int C, int OC) = 0;
  // dinp may be null (no input gradient needed); dbias may be null (no bias).
  virtual void matmul_backward(void* dinp /*(N,C) =*/, float* dw /*(OC,C) +=*/, float* dbias /*(OC) +=*/,
                               const void* dout /*(N,OC)*/, const void* inp /*(N,C)*/,
                               const void* w /*(OC,C)*/, int N, int C, int OC) = 0;
  // Backward of a layer whose input is a GELU, out = gelu(pre) @ w^T + bias, through the GELU:
  // dpre = gelu'(pre) * (dout @ w), dw += dout^T @ inp with inp = gelu(pre), dbias += column sums of dout.
  // cpu: matmul_backward then gelu_backward (bit-identical to the pair); cuda: the GELU derivative in the
  // product's epilogue (cuBLASLt DGELU, reading pre), falling back to the pair.
  virtual void gelu_matmul_backward(void* dpre /*(N,C) =*/, float* dw /*(OC,C) +=*/, float* dbias /*(OC) +=*/,
                                    const void* dout /*(N,OC)*/, const void* inp /*(N,C)*/,
                                    const void* pre /*(N,C)*/, const void* w /*(OC,C)*/, int N, int C,
                                    int OC) = 0;

  // causal multi-head self-attention on packed qkv; `state` is whatever the backend keeps for backward
  // (softmax probabilities: fp32 on cpu, bf16 on cuda; the row log-sum-exp on the fused and cudnn paths),
  // attention_state_bytes() long.
  // The attention path (kernels/attention_rules.h): simple (batched products and a softmax kernel, keeping
  // the probabilities; every backend), fused or cudnn (flash-style, keeping the row log-sum-exp; cuda only,
  // throwing the flag's error elsewhere). Set it before reserve_workspace and attention_state_bytes: both
  // depend on it. `automatic`: --attention auto chose it; a cudnn path that cuDNN cannot plan for a shape
  // (reserve_workspace) then falls back to the path auto takes without cuDNN, saying so on stderr.
  virtual void set_attention_path(AttentionPath path, bool automatic = false);
  virtual AttentionPath attention_path() const { return AttentionPath::simple; }
  // The device the attention paths would run on, for resolving --attention (resolve_attention_path).
  virtual AttentionTarget attention_target() const { return {}; }
  virtual size_t attention_state_bytes(int B, int T, int NH) const = 0;
  virtual void attention_forward(void* out /*(B,T,C)*/, void* state, const void* qkv /*(B,T,3C)*/, int B,
                                 int T, int C, int NH) = 0;
  virtual void attention_backward(void* dqkv /*(B,T,3C) =*/, const void* dout /*(B,T,C)*/,
                                  const void* qkv /*(B,T,3C)*/, const void* out /*(B,T,C)*/,
                                  const void* state, int B, int T, int C, int NH) = 0;
  // Attention over a key/value cache, for sampling (GPT::forward_cached): the Tn new positions
  // past..past+Tn-1 of each sequence. Their keys and values (from qkv) are written into the caches at those
  // positions, then each new query attends causally over positions 0..its own: out = softmax(q k^T / sqrt(hs))
  // v, what attention_forward gives that row over the whole sequence. Positions < past must hold the earlier
  // calls' keys and values. The same op on every attention path; nothing is kept for a backward.
  virtual void attention_cached_forward(void* out /*(B,Tn,C)*/, void* kcache /*(B,NH,Tmax,hs)*/,
                                        void* vcache /*(B,NH,Tmax,hs)*/, const void* qkv /*(B,Tn,3C)*/, int B,
                                        int Tn, int past, int Tmax, int C, int NH) = 0;

  // GELU, tanh approximation (GPT-2's)
  virtual void gelu_forward(void* out /*(N)*/, const void* inp /*(N)*/, size_t n) = 0;
  // dinp may be dout (in place).
  virtual void gelu_backward(void* dinp /*(N) =*/, const void* inp /*(N)*/, const void* dout /*(N)*/,
                             size_t n) = 0;

  // residual: out = a + b; backward adds a branch's input gradient into the stream: dstream += dbranch
  virtual void residual_forward(void* out /*(N)*/, const void* a /*(N)*/, const void* b /*(N)*/,
                                size_t n) = 0;
  virtual void residual_backward(void* dstream /*(N) +=*/, const void* dbranch /*(N)*/, size_t n) = 0;

  // classifier: softmax + cross-entropy over the first V of Vp logits (padded columns are masked out).
  // forward: losses[i] = -log softmax(logits[i])[targets[i]], logits untouched.
  virtual void classifier_forward(float* losses /*(N)*/, const void* logits /*(N,Vp)*/,
                                  const int* targets /*(N)*/, int N, int V, int Vp) = 0;
  // The training pass, forward and backward fused: writes losses and overwrites logits with dlogits =
  // dloss*(softmax - onehot), zero in the padded columns; the full softmax is never stored separately. When
  // loss_sum (one fp64 on the device) is not null, the N losses are summed in a fixed order and added to it,
  // so a trainer can total a step's loss on the device and read it once.
  virtual void classifier_backward(void* logits_to_dlogits /*(N,Vp)*/, float* losses /*(N)*/,
                                   double* loss_sum /*(1) += or null*/, const int* targets /*(N)*/, float dloss,
                                   int N, int V, int Vp) = 0;

  // ---- tensor parallelism: the vocab-parallel embedding and loss, and a bias added after a reduction ------
  // (src/model/tensor_parallel.h says where the model runs them, and the TP collectives between them.)
  // The token lookup of one slice of the vocabulary, wte rows [lo, lo + rows): out[i] = wte_rows[tokens[i] - lo]
  // when the token lies in the slice, else 0, so the sum over the TP group that follows adds exactly one nonzero
  // row per token. Token ids are checked as encoder_forward checks them (never negative).
  virtual void embedding_slice_forward(void* out /*(N,C)*/, const int* tokens /*(N)*/,
                                       const void* wte_rows /*(rows,C)*/, int lo, int rows, int N, int C) = 0;
  // dwte_rows[tokens[i] - lo] += dout[i] for the tokens in the slice, summed in row order (encoder_backward's;
  // with lo = 0 and every token in the slice, the same dwte as encoder_backward, bit for bit). cuda: the scratch
  // of encoder_backward over N positions, which reserve_workspace holds for N <= B*T.
  virtual void embedding_slice_backward(float* dwte_rows /*(rows,C) +=*/, const void* dout /*(N,C)*/,
                                        const int* tokens /*(N)*/, int lo, int rows, int N, int C) = 0;
  // The position embedding of n consecutive rows of the (B, T) grid, starting at row `first`:
  // x[i] += wpe[(first + i) % T]. After embedding_slice_forward over the whole vocabulary (first = 0,
  // n = B*T) x equals encoder_forward's out bit for bit: the same single addition per element.
  virtual void position_forward(void* x /*(n,C) +=*/, const void* wpe /*(maxT,C)*/, int first, int n, int T,
                                int C) = 0;
  // dwpe[(first + i) % T] += dout[i], summed in row order (with first = 0 and n = B*T, encoder_backward's dwpe
  // bit for bit). Positions no row lands on are left untouched.
  virtual void position_backward(float* dwpe /*(maxT,C) +=*/, const void* dout /*(n,C)*/, int first, int n, int T,
                                 int C) = 0;
  // A row-parallel product's bias, added once after the reduction of the partial products: x[i] += bias
  // (rounded once to the compute dtype); and its gradient, the column sums of dout, in matmul_backward's fixed
  // order (the same dbias as matmul_backward over the same dout, bit for bit: row order on cpu; on cuda row
  // chunks in a fixed order, with matmul_backward's scratch, which reserve_workspace holds for OC <= max_bias_oc).
  virtual void bias_forward(void* x /*(N,OC) +=*/, const void* bias /*(OC)*/, int N, int OC) = 0;
  virtual void bias_backward(float* dbias /*(OC) +=*/, const void* dout /*(N,OC)*/, int N, int OC) = 0;
  // The vocab-parallel cross-entropy (Megatron's): this rank's logits (N, Vs) are vocabulary [lo, lo + Vs), of
  // which the first `valid` columns are real (the rest is vocabulary padding, never in the softmax; valid may be
  // 0). Three passes, with reductions over the TP group between them, so no rank holds all (N, Vp) logits:
  //   classifier_slice_stats     maxes[i] = the max of row i's valid columns (-inf when there are none);
  //                              target[i] = the target's logit when it lies in the slice, else 0
  //                                -> max over the group of maxes, sum over the group of target
  //   classifier_slice_sumexp    sums[i] = the sum of exp(logit - maxes[i]) over row i's valid columns
  //                                -> sum over the group of sums
  //   classifier_slice_backward  losses[i] = log(sums[i]) + maxes[i] - target[i]; loss_sum (one fp64, when not
  //                              null) += the N losses summed in row order; when logits_to_dlogits is not null,
  //                              its logits are overwritten with dloss * (exp(logit - maxes[i]) / sums[i] - [the
  //                              column is the target]), 0 in the padding columns
  // "In the slice" means among the valid columns, lo <= target < lo + valid (a target below V never falls in a
  // padding column). Targets are checked to lie in [0, V), V the whole vocabulary (classifier_forward's
  // message), by classifier_slice_stats (cuda, like classifier_forward there: a NaN target[i], hence a NaN loss).
  // The exponentials are the classifier's own (cpu fast_exp, cuda exp2f), so the group's loss and dlogits equal
  // classifier_backward's over the whole (N, Vp) logits up to the order of the exp-sum's additions.
  virtual void classifier_slice_stats(float* maxes /*(N)*/, float* target /*(N)*/, const void* logits /*(N,Vs)*/,
                                      const int* targets /*(N)*/, int lo, int valid, int N, int Vs, int V) = 0;
  virtual void classifier_slice_sumexp(float* sums /*(N)*/, const void* logits /*(N,Vs)*/, const float* maxes /*(N)*/,
                                       int valid, int N, int Vs) = 0;
  virtual void classifier_slice_backward(void* logits_to_dlogits /*(N,Vs) or null*/, float* losses /*(N)*/,
                                         double* loss_sum /*(1) += or null*/, const float* maxes /*(N)*/,
                                         const float* sums /*(N)*/, const float* target /*(N)*/,
                                         const int* targets /*(N)*/, int lo, int valid, float dloss, int N,
                                         int Vs) = 0;

  // AdamW on one contiguous fp32 segment (decoupled weight decay, bias-corrected moments). param_out, when not
  // null, receives the updated parameters in this backend's compute dtype, in the same pass (cuda: rounded to
  // bf16 as f32_to_compute rounds; cpu: an fp32 copy): the FSDP engine's compute copy (fsdp/geometry.h).
  virtual void adamw_update(float* param, const float* grad, float* m, float* v, void* param_out /*(n) or null*/,
                            size_t n, const AdamWParams& hp) = 0;
  // sum of squares of an fp32 buffer, accumulated in double (for the global grad norm).
  virtual double sum_squares(const float* x, size_t n) = 0;
  // The sums of squares of count fp32 buffers (xs[i], ns[i] elements), each as sum_squares computes it,
  // added in index order starting from 0: bit-identical to the loop of sum_squares (the default; the cpu
  // backend's op is that loop). cuda queues every buffer's reduction and waits for the device once, not once
  // per buffer.
  virtual double sum_squares_all(const float* const* xs, const size_t* ns, int count);
  // y += x / divisor for fp32 buffers, one IEEE division per element: gradient accumulation into shards,
  // where x is a sum over `divisor` ranks (1: a plain add, since x / 1 is x).
  virtual void accumulate_f32(float* y /*(n) +=*/, const float* x /*(n)*/, size_t n, float divisor) = 0;

 protected:
  virtual void* raw_alloc(size_t bytes) = 0;
  virtual void raw_free(void* p) = 0;
  virtual void* raw_alloc_host(size_t bytes) = 0;
  virtual void raw_free_host(void* p) = 0;

 private:
  MemoryLedger ledger_;
};

// The host side of `device`: the CPU kernels on memory from device.alloc_host (pinned on cuda), recorded in
// device's ledger under the host domain; its copies are memcpy. Offloaded model states live here, so the
// FSDP engine makes the same calls on them (zero, accumulate, sum_squares, adamw_update, copies) wherever
// they are. `device` must outlive it.
std::unique_ptr<Backend> make_host_backend(Backend& device);

// "cpu" or "cuda" -> the kind. Throws the --device error for anything else.
DeviceKind parse_device_kind(const std::string& device);
// The backend of `kind`. cuda runs on GPU local_rank % (GPUs visible): the caller passes its node-local
// rank (Communicator::local_rank) so that the ranks of one node spread over its GPUs. Throws gpt::Error
// naming the device when it is not built or absent.
std::unique_ptr<Backend> make_backend(DeviceKind kind, int local_rank);
// By name, on local rank 0 (tests and one-process tools): make_backend(parse_device_kind(device), 0).
std::unique_ptr<Backend> make_backend(const std::string& device);
// True when this build has the CUDA backend and a GPU is visible.
bool cuda_available();

// What the attention paths would meet on a cuda run: this machine's first GPU when cuda_available(), else
// (planning a run for a machine without one here) an sm_90 GPU (H100/H200) with the cuDNN this build links.
AttentionTarget planning_attention_target();
// The workspace cuDNN's attention plans need at (B, T, C, NH), by building them on this machine's first GPU;
// empty without a GPU or cuDNN (the memory planner then counts 0 and says its figure is not exact).
std::optional<cuda::CudnnPlanWorkspace> measured_cudnn_plan_workspace(int B, int T, int C, int NH);

}  // namespace gpt
