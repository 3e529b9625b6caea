// The step's pieces under tensor parallelism (tensor_parallel.h): Megatron's split of each block, the
// vocab-parallel embedding and loss, and sequence parallelism between the products. Each function has the
// shape of its counterpart in gpt.cpp, with the group's collectives where the split needs them: gather_rows
// before a column-parallel product and sum_rows after a row-parallel one, each the other's conjugate in
// backward.
// Shapes: N = B*T rows; n = tp_->local_rows(N) rows of the residual stream on this rank (N/T with sequence
// parallelism, else N); C channels; Cl = C/T channels of this rank's NHl = NH/T heads; Vs = Vp/T vocabulary
// rows (wte's slice, [vocab_lo, vocab_lo + Vs)).
#include <algorithm>

#include "src/core/check.h"
#include "src/model/gpt.h"
#include "src/util/trace.h"

namespace gpt {

// x0 = wte[tok] + wpe[t]: each rank looks up the tokens of its vocabulary slice (zero rows for the others'),
// the group sums the lookups (each row has exactly one nonzero term), then the position embedding is added
// to this rank's rows.
void GPT::embed_forward_tp(const void* embed) {
  const int T = acts_->T, N = acts_->B * T, C = config().channels;
  void* lookup = tp_->sequence_parallel() ? acts_->dnarrow_a : acts_->resid[0];  // (N, C)
  be_.embedding_slice_forward(lookup, acts_->inputs, at(embed, layout_.wte_offset()), layout_.vocab_lo(),
                              layout_.vocab_rows(), N, C);
  void* x = tp_->sum_rows(lookup, acts_->resid[0], N, C, "embed");  // (n, C)
  be_.position_forward(x, at(embed, layout_.wpe_offset()), tp_->first_row(N), tp_->local_rows(N), T, C);
}

// One block: ln1 -> [gather] -> qkv (this rank's heads) -> attention -> attproj (partial) -> [sum] + bias
// -> res2 = x + . -> ln2 -> [gather] -> fc (this rank's 4C/T) -> gelu -> fcproj (partial) -> [sum] + bias.
// With only_scratch (a recompute), only what the layer did not keep, collectives included.
void GPT::block_forward_tp(int l, const BlockParams& p, const void* x, void* out, bool only_scratch) {
  const GPTConfig& c = config();
  const int B = acts_->B, T = acts_->T, N = B * T, n = tp_->local_rows(N), C = c.channels;
  const int Cl = C / tp_->size(), NHl = c.num_heads / tp_->size();
  BlockActs& a = acts_->blocks[l];
  const KeptFields& k = acts_->kept[l];
  auto run = [&](bool kept) { return !only_scratch || !kept; };
  const bool sp = tp_->sequence_parallel();
  void* ln_mine = sp ? acts_->ln_local : nullptr;  // (n, C): a layernorm's own rows before their gather
  const std::string name = "block" + std::to_string(l);  // (no stream: this runs per layer and step)

  using F = BlockField;
  if (run(k[F::ln1] && k[F::ln1_stats])) {
    be_.layernorm_forward(sp ? ln_mine : a.ln1, a.ln1_mean, a.ln1_rstd, x, p.ln1w, p.ln1b, n, C);
    tp_->gather_rows(ln_mine, a.ln1, N, C, name + " ln1");  // a.ln1: all N rows
  }
  if (run(k[F::qkv])) be_.matmul_forward(a.qkv, a.ln1, p.qkvw, p.qkvb, N, C, 3 * Cl);
  if (run(k[F::atty] && k[F::att_state])) be_.attention_forward(a.atty, a.att_state, a.qkv, B, T, Cl, NHl);
  const bool ln2 = run(k[F::ln2] && k[F::ln2_stats]);
  void* ln2_out = sp ? ln_mine : a.ln2;  // (n, C)
  if (run(k[F::res2])) {
    void* partial = acts_->dnarrow_a;  // (N, C): this rank's heads' share of the projection
    be_.matmul_forward(partial, a.atty, p.attprojw, nullptr, N, Cl, C);
    void* proj = tp_->sum_rows(partial, acts_->tp_rows, N, C, name + " attproj");  // (n, C)
    be_.bias_forward(proj, p.attprojb, n, C);  // once, after the sum
    if (ln2)
      be_.residual_layernorm_forward(a.res2, ln2_out, a.ln2_mean, a.ln2_rstd, x, proj, p.ln2w, p.ln2b, n, C);
    else
      be_.residual_forward(a.res2, x, proj, (size_t)n * C);
  } else if (ln2) {
    be_.layernorm_forward(ln2_out, a.ln2_mean, a.ln2_rstd, a.res2, p.ln2w, p.ln2b, n, C);
  }
  if (ln2 && sp) tp_->gather_rows(ln2_out, a.ln2, N, C, name + " ln2");
  // the GELU as gpt.cpp's block_forward runs it (one rule for forward and recompute)
  if (k[F::fch] == k[F::fch_gelu]) {
    if (run(k[F::fch])) be_.matmul_gelu_forward(a.fch_gelu, a.fch, a.ln2, p.fcw, p.fcb, N, C, 4 * Cl);
  } else {
    if (run(k[F::fch])) be_.matmul_forward(a.fch, a.ln2, p.fcw, p.fcb, N, C, 4 * Cl);
    if (run(k[F::fch_gelu])) be_.gelu_forward(a.fch_gelu, a.fch, (size_t)N * 4 * Cl);
  }
  if (only_scratch) return;
  void* partial = acts_->dnarrow_a;  // (N, C)
  be_.matmul_forward(partial, a.fch_gelu, p.fcprojw, nullptr, N, 4 * Cl, C);
  void* proj = tp_->sum_rows(partial, acts_->tp_rows, N, C, name + " fcproj");  // (n, C)
  be_.bias_forward(proj, p.fcprojb, n, C);
  be_.residual_forward(out, a.res2, proj, (size_t)n * C);
}

// Backward of one block. On entry acts_->dres (n, C) holds d(loss)/d(block output); on exit d(loss)/d(x).
// The biases' and layernorms' gradients are this rank's rows' share under sequence parallelism
// (sum_replicated_grads adds them over the group).
void GPT::block_backward_tp(int l, const BlockParams& p, const BlockGrads& g, const void* x) {
  const GPTConfig& c = config();
  const int B = acts_->B, T = acts_->T, N = B * T, n = tp_->local_rows(N), C = c.channels;
  const int Cl = C / tp_->size(), NHl = c.num_heads / tp_->size();
  BlockActs& a = acts_->blocks[l];
  void* dres = acts_->dres;        // (n, C)
  void* dfch = acts_->dwide_b;     // (N, 4Cl)
  void* dln = acts_->dnarrow_a;    // (N, C): a column-parallel product's input gradient, partial
  void* datty = acts_->dnarrow_b;  // (N, Cl)
  void* dqkv = acts_->dwide_a;     // (N, 3Cl)
  const std::string name = "block" + std::to_string(l);  // (no stream: this runs per layer and step)

  // MLP branch: out = res2 + sum(fcproj(gelu(fc(ln2(res2))))) + fcprojb
  be_.bias_backward(g.fcprojb, dres, n, C);
  const void* dproj = tp_->gather_rows(dres, acts_->tp_rows, N, C, name + " fcproj backward");  // (N, C)
  be_.gelu_matmul_backward(dfch, g.fcprojw, nullptr, dproj, a.fch_gelu, a.fch, p.fcprojw, N, 4 * Cl, C);
  be_.matmul_backward(dln, g.fcw, g.fcb, dfch, a.ln2, p.fcw, N, C, 4 * Cl);
  const void* dln2 = tp_->sum_rows(dln, acts_->tp_rows, N, C, name + " ln2 backward");  // (n, C)
  be_.layernorm_backward_residual(dres, g.ln2w, g.ln2b, dln2, a.res2, p.ln2w, a.ln2_mean, a.ln2_rstd, n, C);
  // dres is now d/d(res2). attention branch: res2 = x + sum(attproj(attention(qkv(ln1(x))))) + attprojb
  be_.bias_backward(g.attprojb, dres, n, C);
  dproj = tp_->gather_rows(dres, acts_->tp_rows, N, C, name + " attproj backward");
  be_.matmul_backward(datty, g.attprojw, nullptr, dproj, a.atty, p.attprojw, N, Cl, C);
  be_.attention_backward(dqkv, datty, a.qkv, a.atty, a.att_state, B, T, Cl, NHl);
  be_.matmul_backward(dln, g.qkvw, g.qkvb, dqkv, a.ln1, p.qkvw, N, C, 3 * Cl);
  const void* dln1 = tp_->sum_rows(dln, acts_->tp_rows, N, C, name + " ln1 backward");
  be_.layernorm_backward_residual(dres, g.ln1w, g.ln1b, dln1, x, p.ln1w, a.ln1_mean, a.ln1_rstd, n, C);
  // dres is now d/d(x)
}

// The final layernorm on this rank's rows, gathered, and the LM head on this rank's vocabulary slice: logits
// (N, Vs), never all Vp columns on one rank.
void GPT::head_forward_tp(const void* embed) {
  const GPTConfig& c = config();
  const int N = acts_->B * acts_->T, n = tp_->local_rows(N), C = c.channels, L = c.num_layers;
  const bool sp = tp_->sequence_parallel();
  {
    trace::Scope ts(trace::kCompute, "forward lnf", "compute");
    const void* lnf = at(embed, layout_.lnf_offset());
    void* mine = sp ? acts_->ln_local : acts_->lnf;  // (n, C)
    be_.layernorm_forward(mine, acts_->lnf_mean, acts_->lnf_rstd, acts_->resid[L], lnf, at(lnf, C), n, C);
    tp_->gather_rows(mine, acts_->lnf, N, C, "lnf");  // (N, C)
  }
  trace::Scope ts(trace::kCompute, "forward lm_head", "compute");
  be_.matmul_forward(acts_->logits, acts_->lnf, at(embed, layout_.wte_offset()), nullptr, N, C, layout_.vocab_rows());
}

// The vocab-parallel cross-entropy over the logits (N, Vs): each row's max and target logit, then its sum of
// exponentials, each combined over the group (Backend::classifier_slice_stats says what each pass computes).
// With dlogits (the logits buffer) the logits become their gradient, and the losses are added to loss_sum.
void GPT::loss_tp(void* dlogits, float dloss) {
  const GPTConfig& c = config();
  const int N = acts_->B * acts_->T, Vs = layout_.vocab_rows(), lo = layout_.vocab_lo();
  const int valid = std::clamp(c.vocab_size - lo, 0, Vs);  // the slice's real columns (the rest is padding)
  be_.classifier_slice_stats(acts_->loss_max, acts_->loss_target, acts_->logits, acts_->targets, lo, valid, N, Vs,
                             c.vocab_size);
  tp_->max_f32(acts_->loss_max, (size_t)N, "loss max");
  be_.classifier_slice_sumexp(acts_->loss_sum_exp, acts_->logits, acts_->loss_max, valid, N, Vs);
  // the target logits and the sums of exponentials lie side by side (Activations): one reduction of both
  tp_->sum_f32(acts_->loss_target, 2 * (size_t)N, "loss sums");
  be_.classifier_slice_backward(dlogits, acts_->losses, dlogits ? acts_->loss_sum : nullptr, acts_->loss_max,
                                acts_->loss_sum_exp, acts_->loss_target, acts_->targets, lo, valid, dloss, N, Vs);
}

void GPT::head_backward_tp(const void* embed, float* gembed, float dloss) {
  const GPTConfig& c = config();
  const int N = acts_->B * acts_->T, n = tp_->local_rows(N), C = c.channels, L = c.num_layers;
  void* dlnf = acts_->dnarrow_a;  // (N, C): partial, over this rank's vocabulary slice
  {
    trace::Scope ts(trace::kCompute, "backward lm_head", "compute");
    loss_tp(acts_->logits, dloss);  // logits -> dlogits (N, Vs)
    be_.matmul_backward(dlnf, gembed + layout_.wte_offset(), nullptr, acts_->logits, acts_->lnf,
                        at(embed, layout_.wte_offset()), N, C, layout_.vocab_rows());
  }
  trace::Scope ts(trace::kCompute, "backward lnf", "compute");
  const void* dmine = tp_->sum_rows(dlnf, acts_->tp_rows, N, C, "lnf backward");  // (n, C)
  const int64_t lnf = layout_.lnf_offset();
  const int eu = layout_.embed_unit();
  be_.layernorm_backward(acts_->dres, grad_at(eu, gembed, lnf), grad_at(eu, gembed, lnf + C), dmine,
                         acts_->resid[L], at(embed, lnf), acts_->lnf_mean, acts_->lnf_rstd, n, C);
}

// wte's slice takes the gradient of every row whose token it holds (all N rows, gathered); wpe this rank's rows'.
void GPT::embed_backward_tp(float* gembed) {
  const int T = acts_->T, N = acts_->B * T, C = config().channels;
  const void* dx = tp_->gather_rows(acts_->dres, acts_->tp_rows, N, C, "embed backward");  // (N, C)
  be_.embedding_slice_backward(gembed + layout_.wte_offset(), dx, acts_->inputs, layout_.vocab_lo(),
                               layout_.vocab_rows(), N, C);
  be_.position_backward(grad_at(layout_.embed_unit(), gembed, layout_.wpe_offset()), acts_->dres, tp_->first_row(N),
                        tp_->local_rows(N), T, C);
}

int64_t GPT::replicated_grad_scratch(const Layout& layout) {
  int64_t largest = 0;  // of the units but the root
  for (int u = 0; u < layout.num_units(); u++)
    if (!layout.is_root(u)) largest = std::max(largest, layout.replicated_span(u).numel);
  return layout.replicated_span(layout.root_unit()).numel + largest;
}

// The root unit's span first, then the others' (one at a time: a unit's backward ends before the next begins).
float* GPT::replicated_scratch(int u) const {
  return acts_->replicated_grads + (layout_.is_root(u) ? 0 : layout_.replicated_span(layout_.root_unit()).numel);
}

float* GPT::grad_at(int u, float* g, int64_t offset) const {
  if (!tp_ || !tp_->sequence_parallel()) return g + offset;  // without: every rank's gradient is the full one
  const Layout::Span s = layout_.replicated_span(u);
  return offset >= s.first && offset < s.first + s.numel ? replicated_scratch(u) + (offset - s.first) : g + offset;
}

void GPT::begin_replicated_grads(int u) {
  if (!tp_ || !tp_->sequence_parallel()) return;
  be_.zero(replicated_scratch(u), (size_t)layout_.replicated_span(u).numel * sizeof(float));
}

void GPT::sum_replicated_grads(int u, float* g) {
  if (!tp_ || !tp_->sequence_parallel()) return;
  const Layout::Span s = layout_.replicated_span(u);
  float* partial = replicated_scratch(u);  // (s.numel) fp32: this micro-step's, this rank's rows'
  tp_->sum_grads(partial, (size_t)s.numel, layout_.unit(u).name + " replicated");
  be_.accumulate_f32(g + s.first, partial, (size_t)s.numel, 1.0f);
}

}  // namespace gpt
