// GPT-2: the order of the math of one training step, written once against the Backend interface.
// Parameters come from a ParamSource one unit at a time (model/param_source.h), so the same code runs
// unsharded or under FSDP. The model owns only activations.
#pragma once
#include <memory>
#include <vector>

#include "src/backend/backend.h"
#include "src/model/activations.h"
#include "src/model/config.h"
#include "src/model/init_rule.h"
#include "src/model/kv_cache.h"
#include "src/model/layout.h"
#include "src/model/param_source.h"
#include "src/model/recompute.h"
#include "src/model/tensor_parallel.h"
#include "src/model/wrap.h"

namespace gpt {

class GPT {
 public:
  // offload_activations: --offload activations (model/activation_ring.h). tp: this rank's tensor-parallel
  // group (tensor_parallel.h), or null: the layout is then this rank's slice of every split tensor, and the
  // model issues the group's collectives itself (gpt_tp.cpp). It must outlive the model.
  GPT(Backend& be, const GPTConfig& cfg, RecomputePolicy recompute = {}, const WrapPolicy& wrap = {},
      bool offload_activations = false, TensorParallel* tp = nullptr);
  const GPTConfig& config() const { return layout_.config(); }
  const Layout& layout() const { return layout_; }
  Backend& backend() { return be_; }
  const RecomputePolicy& recompute() const { return recompute_; }
  TensorParallel* tensor_parallel() const { return tp_; }
  TpOptions tp_options() const;  // {1, off} without tensor parallelism

  // Evaluation and sampling: forward over host token ids (B*T). With targets: the per-token losses of a
  // forward-only classifier pass, returned as their mean (the host waits for the device). Without targets
  // (nullptr): the logits only, returns 0. Allocates activations for (B, T) on first use or when the shape
  // changes. Token ids go to the device through pinned staging buffers (Backend::alloc_host).
  float forward(const int* inputs, const int* targets, int B, int T, ParamSource& params);
  // Training: the forward of one micro-step, up to the logits, with the targets staged for backward. Nothing
  // waits for the device: backward computes the losses and dlogits in one classifier pass.
  void forward_train(const int* inputs, const int* targets, int B, int T, ParamSource& params);
  // Backward of the last forward (either kind, with targets). dloss is d(objective)/d(loss of one token),
  // e.g. 1/(B*T*grad_accum_steps). Parameter gradients are accumulated into params.grad_buffer(u). The
  // micro-batch's summed per-token loss is added to a total kept on the device (take_loss_sum).
  void backward(float dloss, ParamSource& params);
  // The sum of the per-token losses of every backward since the last call, read from the device (one host
  // wait); the total restarts from 0. A trainer calls it once per step.
  double take_loss_sum();
  // Sampling: runs tokens[0..n) at positions cache.length().. of one sequence through the model, appending
  // every layer's keys and values to the cache, and returns the last position's logits, (Vp) in compute
  // dtype on the device (valid until the next call). The same math as forward() over the whole sequence
  // with recompute none. Needs cache.length() + n <= cache.capacity().
  const void* forward_cached(const int* tokens, int n, KvCache& cache, ParamSource& params);
  // Logits of the last forward, (B, T, Vp) in compute dtype on the device.
  const void* logits() const { return acts_ ? acts_->logits : nullptr; }
  // Per-token losses of the last forward, copied to the host (B*T).
  std::vector<float> losses_to_host();
  // Drop the activations (frees their memory).
  void release_activations() { acts_.reset(); }
  // Reserves the backend's scratch for this model's ops at micro-batch (B, T) (Backend::reserve_workspace;
  // the widest matmul with a bias is fc, 4C outputs), so no step allocates it. forward() calls it whenever it
  // sets up activations for a new shape; a trainer calls it up front so the workspace shows before step 1.
  void reserve_workspace(int B, int T);
  // The most outputs of a bias whose gradient a rank's backward takes (the bias-gradient scratch's size).
  static int max_bias_outputs(const GPTConfig& cfg, int tp);
  // The replicated-gradient scratch's elements under sequence parallelism: the root unit's replicated span
  // and the largest other unit's (grad_at).
  static int64_t replicated_grad_scratch(const Layout& layout);

  // Deterministic GPT-2 init of one unit's flat fp32 params (host): N(0, 0.02) for embeddings, matrices by
  // the rule (InitRule), residual projections scaled by a further 1/sqrt(2L), biases 0, layernorm gains 1.
  // Depends only on (seed, unit, rule), never on the world size.
  static void init_unit(const Layout& layout, int unit, uint64_t seed, float* out,
                        InitRule rule = InitRule::gpt2);
  // The std of the non-projection matrices under the rule (0.02 for gpt2).
  static double matrix_init_std(const GPTConfig& c, InitRule rule);

 private:
  struct BlockParams {  // one block's parameters inside its gathered unit (compute dtype), Layout's order
    const void *ln1w, *ln1b, *qkvw, *qkvb, *attprojw, *attprojb, *ln2w, *ln2b, *fcw, *fcb, *fcprojw, *fcprojb;
  };
  // Block l's views inside its unit's gathered parameters (compute dtype) or full-unit gradient (fp32).
  BlockParams block_params(const void* unit, int layer) const;
  struct BlockGrads {  // the same views in the unit's fp32 gradient buffer
    float *ln1w, *ln1b, *qkvw, *qkvb, *attprojw, *attprojb, *ln2w, *ln2b, *fcw, *fcb, *fcprojw, *fcprojb;
  };
  BlockGrads block_grads(float* unit, int layer) const;
  void block_forward(int layer, const BlockParams& p, const void* x, void* out, bool only_scratch);
  void block_forward_cached(const BlockParams& p, int layer, int n, KvCache& cache);
  void block_forward_cached_tp(const BlockParams& p, int layer, int n, KvCache& cache);
  void block_backward(int layer, const BlockParams& p, const BlockGrads& g, const void* x);
  // The step's ends: the embedding, the final layernorm and LM head (logits), and their backwards.
  void embed_forward(const void* embed);
  void head_forward(const void* embed);
  void head_backward(const void* embed, float* gembed, float dloss);
  void embed_backward(float* gembed);
  // Their tensor-parallel forms (gpt_tp.cpp), and the vocab-parallel loss: losses (and, with dlogits, the
  // gradient of the logits, in place) from this rank's vocabulary slice.
  void block_forward_tp(int layer, const BlockParams& p, const void* x, void* out, bool only_scratch);
  void block_backward_tp(int layer, const BlockParams& p, const BlockGrads& g, const void* x);
  void embed_forward_tp(const void* embed);
  void head_forward_tp(const void* embed);
  void head_backward_tp(const void* embed, float* gembed, float dloss);
  void embed_backward_tp(float* gembed);
  void loss_tp(void* dlogits, float dloss);
  // With sequence parallelism each rank's gradient of a replicated tensor (Layout::replicated_span) is a
  // partial one (tensor_parallel.h): a unit's backward accumulates it into a scratch of its own
  // (Activations::replicated_grads, zeroed by begin_replicated_grads when the unit's backward begins), and
  // sum_replicated_grads sums the scratch over the group and adds it into the engine's buffer g, which may
  // already hold earlier micro-steps' gradients (summing g itself would count those T times). grad_at gives
  // where the gradient of unit u's element `offset` accumulates: the scratch, or g + offset.
  float* grad_at(int u, float* g, int64_t offset) const;
  void begin_replicated_grads(int u);
  void sum_replicated_grads(int u, float* g);
  float* replicated_scratch(int u) const;
  const void* at(const void* base, int64_t elems) const;
  // train: a backward follows (forward_train), so offloaded activations are copied to the host.
  void run_forward(const int* inputs, const int* targets, int B, int T, ParamSource& params, bool train);
  void stage_tokens(const int* inputs, const int* targets, int N);
  void check_tokens(const int* ids, int n) const;  // every id in [0, vocab_size), or throw naming the first

  Backend& be_;
  Layout layout_;
  RecomputePolicy recompute_;
  bool offload_activations_ = false;
  TensorParallel* tp_ = nullptr;  // null without tensor parallelism
  std::unique_ptr<Activations> acts_;
  bool have_targets_ = false;
  uint64_t staged_ = 0;  // copy ticket of the last upload out of the pinned staging (0: none yet)
};

}  // namespace gpt
