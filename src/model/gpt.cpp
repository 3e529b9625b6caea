// The GPT-2 step in the order of the math (llm.c's train_gpt2 is the model for this file):
//   x0 = wte[tok] + wpe[t]
//   per block: ln1 -> qkv -> attention -> attproj -> res2 = x + . -> ln2 -> fc -> gelu -> fcproj -> x + .
//   lnf -> logits = lnf @ wte^T (tied) -> softmax cross-entropy over the first V columns
// Backward walks the same list in reverse. Recomputed layers re-run their forward (only the buffers they
// did not keep) right before their backward, from the kept block input, with the same unit parameters.
// Fusions: res2's add with ln2 (residual_layernorm_forward), the GELU's backward with fcproj's
// (gelu_matmul_backward), each layernorm's backward with the residual-gradient sum
// (layernorm_backward_residual), and in training the loss with dlogits (one classifier pass in backward,
// whose summed loss stays on the device until take_loss_sum).
#include "src/model/gpt.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "src/core/check.h"
#include "src/core/rng.h"
#include "src/util/trace.h"

namespace gpt {

GPT::GPT(Backend& be, const GPTConfig& cfg, RecomputePolicy recompute, const WrapPolicy& wrap,
         bool offload_activations, TensorParallel* tp)
    : be_(be),
      layout_(cfg, wrap, tp ? TpShape{tp->size(), tp->rank()} : TpShape{}),
      recompute_(recompute),
      offload_activations_(offload_activations),
      tp_(tp) {}

TpOptions GPT::tp_options() const {
  TpOptions o;
  if (tp_) o.size = tp_->size(), o.sequence_parallel = tp_->sequence_parallel();
  return o;
}

const void* GPT::at(const void* base, int64_t elems) const {
  return static_cast<const char*>(base) + elems * (int64_t)be_.compute_size();
}

GPT::BlockParams GPT::block_params(const void* unit, int l) const {
  const BlockOffsets& o = layout_.block_offsets(l);
  const void* u = unit;
  return {at(u, o.ln1w), at(u, o.ln1b), at(u, o.qkvw),    at(u, o.qkvb),   at(u, o.attprojw), at(u, o.attprojb),
          at(u, o.ln2w), at(u, o.ln2b), at(u, o.fcw),     at(u, o.fcb),    at(u, o.fcprojw),  at(u, o.fcprojb)};
}

GPT::BlockGrads GPT::block_grads(float* unit, int l) const {
  const BlockOffsets& o = layout_.block_offsets(l);
  const int u = layout_.layer_unit(l);
  auto at = [&](int64_t offset) { return grad_at(u, unit, offset); };
  return {at(o.ln1w), at(o.ln1b), at(o.qkvw), at(o.qkvb), at(o.attprojw), at(o.attprojb),
          at(o.ln2w), at(o.ln2b), at(o.fcw),  at(o.fcb),  at(o.fcprojw),  at(o.fcprojb)};
}

// Forward of one block from x (N,C) into out (N,C). With only_scratch, recompute just the buffers this
// layer did not keep (the kept ones still hold the forward's values).
void GPT::block_forward(int l, const BlockParams& p, const void* x, void* out, bool only_scratch) {
  if (tp_) return block_forward_tp(l, p, x, out, only_scratch);
  const GPTConfig& c = config();
  const int B = acts_->B, T = acts_->T, N = B * T, C = c.channels, NH = c.num_heads;
  BlockActs& a = acts_->blocks[l];
  const KeptFields& k = acts_->kept[l];
  auto run = [&](bool kept) { return !only_scratch || !kept; };
  void* tmp = acts_->dnarrow_a;  // (N, C) projection output before the residual add (forward only)

  using F = BlockField;
  if (run(k[F::ln1] && k[F::ln1_stats])) be_.layernorm_forward(a.ln1, a.ln1_mean, a.ln1_rstd, x, p.ln1w, p.ln1b, N, C);
  if (run(k[F::qkv])) be_.matmul_forward(a.qkv, a.ln1, p.qkvw, p.qkvb, N, C, 3 * C);
  if (run(k[F::atty] && k[F::att_state])) be_.attention_forward(a.atty, a.att_state, a.qkv, B, T, C, NH);
  const bool ln2 = run(k[F::ln2] && k[F::ln2_stats]);
  if (run(k[F::res2])) {
    be_.matmul_forward(tmp, a.atty, p.attprojw, p.attprojb, N, C, C);
    if (ln2)  // the residual add and ln2 in one pass; the same values as the two ops
      be_.residual_layernorm_forward(a.res2, a.ln2, a.ln2_mean, a.ln2_rstd, x, tmp, p.ln2w, p.ln2b, N, C);
    else
      be_.residual_forward(a.res2, x, tmp, (size_t)N * C);
  } else if (ln2) {
    be_.layernorm_forward(a.ln2, a.ln2_mean, a.ln2_rstd, a.res2, p.ln2w, p.ln2b, N, C);
  }
  // The GELU runs the same way in forward and in a recompute, so recomputed values are the forward's: one
  // product with the GELU in its epilogue (the GELU of the fp32 product on cuda) when the layer keeps or
  // drops fch and fch_gelu together; else (selective: fch kept, fch_gelu recomputed) the product, then the
  // GELU of the stored pre-activation, which is what the recompute can re-run.
  if (k[F::fch] == k[F::fch_gelu]) {
    if (run(k[F::fch])) be_.matmul_gelu_forward(a.fch_gelu, a.fch, a.ln2, p.fcw, p.fcb, N, C, 4 * C);
  } else {
    if (run(k[F::fch])) be_.matmul_forward(a.fch, a.ln2, p.fcw, p.fcb, N, C, 4 * C);
    if (run(k[F::fch_gelu])) be_.gelu_forward(a.fch_gelu, a.fch, (size_t)N * 4 * C);
  }
  if (!only_scratch) {
    be_.matmul_forward(tmp, a.fch_gelu, p.fcprojw, p.fcprojb, N, 4 * C, C);
    be_.residual_forward(out, a.res2, tmp, (size_t)N * C);
  }
}

// Backward of one block. On entry acts_->dres holds d(loss)/d(block output); on exit d(loss)/d(x).
void GPT::block_backward(int l, const BlockParams& p, const BlockGrads& g, const void* x) {
  if (tp_) return block_backward_tp(l, p, g, x);
  const GPTConfig& c = config();
  const int B = acts_->B, T = acts_->T, N = B * T, C = c.channels, NH = c.num_heads;
  BlockActs& a = acts_->blocks[l];
  void* dres = acts_->dres;             // (N, C)
  void* dfch = acts_->dwide_b;          // (N, 4C)
  void* dln = acts_->dnarrow_a;         // (N, C)
  void* datty = acts_->dnarrow_b;       // (N, C)
  void* dqkv = acts_->dwide_a;          // (N, 3C)

  // MLP branch: out = res2 + fcproj(gelu(fc(ln2(res2)))); fcproj's backward goes through the GELU at once
  be_.gelu_matmul_backward(dfch, g.fcprojw, g.fcprojb, dres, a.fch_gelu, a.fch, p.fcprojw, N, 4 * C, C);
  be_.matmul_backward(dln, g.fcw, g.fcb, dfch, a.ln2, p.fcw, N, C, 4 * C);
  be_.layernorm_backward_residual(dres, g.ln2w, g.ln2b, dln, a.res2, p.ln2w, a.ln2_mean, a.ln2_rstd, N, C);
  // dres is now d/d(res2). attention branch: res2 = x + attproj(attention(qkv(ln1(x))))
  be_.matmul_backward(datty, g.attprojw, g.attprojb, dres, a.atty, p.attprojw, N, C, C);
  be_.attention_backward(dqkv, datty, a.qkv, a.atty, a.att_state, B, T, C, NH);
  be_.matmul_backward(dln, g.qkvw, g.qkvb, dqkv, a.ln1, p.qkvw, N, C, 3 * C);
  be_.layernorm_backward_residual(dres, g.ln1w, g.ln1b, dln, x, p.ln1w, a.ln1_mean, a.ln1_rstd, N, C);
  // dres is now d/d(x)
}

int GPT::max_bias_outputs(const GPTConfig& c, int tp) {
  // fc's bias has 4C/tp outputs on a rank; with tensor parallelism the biases added after a reduction
  // (bias_forward, bias_backward) have C
  return tp > 1 ? std::max(4 * c.channels / tp, c.channels) : 4 * c.channels;
}

void GPT::reserve_workspace(int B, int T) {
  const GPTConfig& c = config();
  const int tp = tp_ ? tp_->size() : 1;  // this rank's attention runs NH/tp heads
  be_.reserve_workspace(B, T, c.channels, c.num_heads, max_bias_outputs(c, tp), tp);
}

// Copies the token ids into the pinned staging and from there to the device, on the copy stream; compute
// waits for the copies on the device, the host does not. Before the staging is overwritten, the host waits
// for the previous upload out of it (queued a micro-step ago behind the compute queued before it).
void GPT::stage_tokens(const int* inputs, const int* targets, int N) {
  const size_t bytes = sizeof(int) * (size_t)N;
  if (staged_) be_.wait_copy_host(staged_);
  be_.host_write(acts_->host_inputs, inputs, bytes);
  uint64_t t = be_.copy_h2d_async(acts_->inputs, acts_->host_inputs, bytes);
  if (targets) {
    be_.host_write(acts_->host_targets, targets, bytes);
    t = be_.copy_h2d_async(acts_->targets, acts_->host_targets, bytes);  // copies finish in issue order
  }
  be_.wait_copy_device(t);
  staged_ = t;
}

void GPT::check_tokens(const int* ids, int n) const {
  const int V = config().vocab_size;
  for (int i = 0; i < n; i++)
    GPT_CHECK(ids[i] >= 0 && ids[i] < V, "input token ", ids[i], " at position ", i, " is outside the vocabulary [0, ",
              V, ")");
}

// Everything up to the logits.
void GPT::run_forward(const int* inputs, const int* targets, int B, int T, ParamSource& params, bool train) {
  const GPTConfig& c = config();
  GPT_CHECK(B >= 1 && T >= 1, "forward: B and T must be >= 1 (got B=", B, ", T=", T, ")");
  GPT_CHECK(T <= c.max_seq_len, "-T ", T, " exceeds the model's sequence length ", c.max_seq_len);
  check_tokens(inputs, B * T);
  if (!acts_ || acts_->B != B || acts_->T != T) {
    std::unique_ptr<Activations> old = std::move(acts_);
    reserve_workspace(B, T);
    acts_ = std::make_unique<Activations>(be_, c, recompute_, B, T, offload_activations_, tp_options(),
                                          replicated_grad_scratch(layout_));
    if (old) be_.copy_d2d(acts_->loss_sum, old->loss_sum, sizeof(double));  // the step's running loss total
    staged_ = 0;  // the old staging is freed (after its copies, Backend::free_host waits for them)
  }
  const int N = B * T, L = c.num_layers;
  have_targets_ = targets != nullptr;
  stage_tokens(inputs, targets, N);

  const void* embed = params.acquire(layout_.embed_unit(), Pass::forward);
  ActivationRing* ring = acts_->ring.get();  // --offload activations, else null
  if (ring) ring->claim(0);                  // the encoder writes block 0's input
  {
    trace::Scope ts(trace::kCompute, "forward embed", "compute");
    embed_forward(embed);
  }
  const void* unit = nullptr;  // the gathered unit of the blocks running now (a unit may hold several)
  for (int l = 0; l < L; l++) {
    const int u = layout_.layer_unit(l);
    if (layout_.opens_unit(l)) unit = params.acquire(u, Pass::forward);
    if (ring && l + 1 < L) ring->claim(l + 1);  // block l writes block l+1's input
    {
      trace::Scope ts(trace::kCompute, "forward block", l, "compute");
      block_forward(l, block_params(unit, l), acts_->resid[l], acts_->resid[l + 1], false);
    }
    if (ring && train) ring->offload(l);
    if (layout_.closes_unit(l)) params.release(u, Pass::forward);
  }
  head_forward(embed);
  params.release(layout_.embed_unit(), Pass::forward);
}

// x0 = wte[tok] + wpe[t]
void GPT::embed_forward(const void* embed) {
  if (tp_) return embed_forward_tp(embed);
  const int B = acts_->B, T = acts_->T, C = config().channels;
  be_.encoder_forward(acts_->resid[0], acts_->inputs, at(embed, layout_.wte_offset()), at(embed, layout_.wpe_offset()),
                      B, T, C);
}

// The final layernorm (in the root unit) and the LM head (the tied wte): the logits.
void GPT::head_forward(const void* embed) {
  if (tp_) return head_forward_tp(embed);
  const GPTConfig& c = config();
  const int N = acts_->B * acts_->T, C = c.channels, L = c.num_layers;
  {
    trace::Scope ts(trace::kCompute, "forward lnf", "compute");
    const void* lnf = at(embed, layout_.lnf_offset());
    be_.layernorm_forward(acts_->lnf, acts_->lnf_mean, acts_->lnf_rstd, acts_->resid[L], lnf, at(lnf, C), N, C);
  }
  trace::Scope ts(trace::kCompute, "forward lm_head", "compute");
  be_.matmul_forward(acts_->logits, acts_->lnf, at(embed, layout_.wte_offset()), nullptr, N, C, c.padded_vocab_size);
}

float GPT::forward(const int* inputs, const int* targets, int B, int T, ParamSource& params) {
  run_forward(inputs, targets, B, T, params, false);
  if (!targets) return 0.0f;
  const GPTConfig& c = config();
  const int N = B * T;
  if (tp_)
    loss_tp(nullptr, 0.0f);  // the vocab-parallel losses, without dlogits
  else
    be_.classifier_forward(acts_->losses, acts_->logits, acts_->targets, N, c.vocab_size, c.padded_vocab_size);
  std::vector<float> losses = losses_to_host();
  double sum = 0;
  for (float x : losses) sum += x;
  return (float)(sum / N);
}

void GPT::forward_train(const int* inputs, const int* targets, int B, int T, ParamSource& params) {
  GPT_CHECK(targets, "forward_train: needs targets (the loss is computed in backward)");
  run_forward(inputs, targets, B, T, params, true);
}

void GPT::backward(float dloss, ParamSource& params) {
  GPT_CHECK(acts_ && have_targets_, "backward: needs a forward with targets first");
  const int L = config().num_layers;
  const int eu = layout_.embed_unit();
  const void* embed = params.acquire(eu, Pass::backward);
  float* gembed = params.grad_buffer(eu);
  begin_replicated_grads(eu);
  head_backward(embed, gembed, dloss);  // acts_->dres = d(loss)/d(last block's output)
  // blocks in reverse, each unit acquired at its last block and done at its first; recomputed layers first
  // re-create what they did not keep
  const void* unit = nullptr;
  ActivationRing* ring = acts_->ring.get();  // --offload activations, else null
  for (int l = L - 1; l >= 0; l--) {
    const int u = layout_.layer_unit(l);
    if (layout_.closes_unit(l)) {
      unit = params.acquire(u, Pass::backward);
      begin_replicated_grads(u);
    }
    if (ring) {
      ring->ready(l);                 // this block's kept activations, back on the device
      if (l > 0) ring->fetch(l - 1);  // the next block's, while this one computes
    }
    BlockParams p = block_params(unit, l);
    if (!acts_->kept[l].all()) {
      trace::Scope ts(trace::kCompute, "recompute block", l, "compute");
      block_forward(l, p, acts_->resid[l], nullptr, true);
    }
    float* g = params.grad_buffer(u);
    {
      trace::Scope ts(trace::kCompute, "backward block", l, "compute");
      block_backward(l, p, block_grads(g, l), acts_->resid[l]);
    }
    if (layout_.opens_unit(l)) {
      sum_replicated_grads(u, g);
      params.release(u, Pass::backward);
      params.grad_ready(u);
    }
  }
  {
    trace::Scope ts(trace::kCompute, "backward embed", "compute");
    embed_backward(gembed);
  }
  sum_replicated_grads(eu, gembed);
  params.grad_ready(eu);
  params.release(eu, Pass::backward);
}

// The LM head (tied wte: the classifier turns the logits into dlogits in place) and the final layernorm.
void GPT::head_backward(const void* embed, float* gembed, float dloss) {
  if (tp_) return head_backward_tp(embed, gembed, dloss);
  const GPTConfig& c = config();
  const int N = acts_->B * acts_->T, C = c.channels, L = c.num_layers;
  void* dlnf = acts_->dnarrow_a;  // (N, C)
  {
    trace::Scope ts(trace::kCompute, "backward lm_head", "compute");
    be_.classifier_backward(acts_->logits, acts_->losses, acts_->loss_sum, acts_->targets, dloss, N, c.vocab_size,
                            c.padded_vocab_size);
    be_.matmul_backward(dlnf, gembed + layout_.wte_offset(), nullptr, acts_->logits, acts_->lnf,
                        at(embed, layout_.wte_offset()), N, C, c.padded_vocab_size);
  }
  trace::Scope ts(trace::kCompute, "backward lnf", "compute");  // the final layernorm, in the root unit
  const int64_t lnf = layout_.lnf_offset();
  be_.layernorm_backward(acts_->dres, gembed + lnf, gembed + lnf + C, dlnf, acts_->resid[L], at(embed, lnf),
                         acts_->lnf_mean, acts_->lnf_rstd, N, C);
}

void GPT::embed_backward(float* gembed) {
  if (tp_) return embed_backward_tp(gembed);
  be_.encoder_backward(gembed + layout_.wte_offset(), gembed + layout_.wpe_offset(), acts_->dres, acts_->inputs,
                       acts_->B, acts_->T, config().channels);
}

std::vector<float> GPT::losses_to_host() {
  GPT_CHECK(acts_, "losses_to_host: no forward has run");
  std::vector<float> out((size_t)acts_->B * acts_->T);
  be_.copy_d2h(out.data(), acts_->losses, out.size() * sizeof(float));
  be_.synchronize();
  return out;
}

double GPT::take_loss_sum() {
  GPT_CHECK(acts_, "take_loss_sum: no forward has run");
  double sum = 0;
  be_.copy_d2h(&sum, acts_->loss_sum, sizeof(double));
  be_.synchronize();
  be_.zero(acts_->loss_sum, sizeof(double));
  return sum;
}

double GPT::matrix_init_std(const GPTConfig& c, InitRule rule) {
  constexpr double kGpt2Std = 0.02, kGpt2Width = 768.0;  // GPT-2 small's std and width
  return rule == InitRule::gpt2 ? kGpt2Std : kGpt2Std * std::sqrt(kGpt2Width / c.channels);
}

// The random streams are per block, not per unit: block l draws from stream 1 + l and the embeddings from
// stream 0 (the final layernorm draws nothing), so the values do not depend on the wrap either.
void GPT::init_unit(const Layout& layout, int unit, uint64_t seed, float* out, InitRule rule) {
  const UnitSpec& u = layout.unit(unit);
  const GPTConfig& c = layout.config();
  auto stream = [&](int layer) {
    const uint64_t s = (uint64_t)(layer + 1);
    return Rng(seed * 0x9E3779B97F4A7C15ULL + s * 0xD1B54A32D192ED03ULL + 1);
  };
  Rng rng = stream(-1);
  int rng_layer = -1;
  const double embed_std = 0.02, matrix_std = matrix_init_std(c, rule);
  const double resid_std = matrix_std / std::sqrt(2.0 * c.num_layers);
  for (const TensorSpec& t : u.tensors) {
    if (t.layer != rng_layer) rng = stream(rng_layer = t.layer);
    float* p = out + t.offset;
    if (t.name == "ln1w" || t.name == "ln2w" || t.name == "lnfw") {
      for (int64_t i = 0; i < t.numel; i++) p[i] = 1.0f;
    } else if (!t.weight_decay) {  // biases
      for (int64_t i = 0; i < t.numel; i++) p[i] = 0.0f;
    } else {
      const bool resid_proj = t.name == "attprojw" || t.name == "fcprojw";
      const bool embedding = t.name == "wte" || t.name == "wpe";
      const double std = embedding ? embed_std : resid_proj ? resid_std : matrix_std;
      int64_t n = t.numel;
      if (t.name == "wte") n = (int64_t)c.vocab_size * c.channels;  // padded rows stay 0
      for (int64_t i = 0; i < n; i++) p[i] = (float)(std * rng.normal());
      for (int64_t i = n; i < t.numel; i++) p[i] = 0.0f;
    }
  }
}

}  // namespace gpt
