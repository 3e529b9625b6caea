// Allocation of the activation buffers described in activations.h.
#include "src/model/activations.h"

namespace gpt {

KeptFields KeptFields::for_layer(const RecomputePolicy& p, int layer) {
  KeptFields k;
  if (p.layer_recomputes_all(layer)) {
    k = KeptFields{false, false, false, false, false, false, false, false, false, false};
  } else if (p.selective()) {
    // keep matmul outputs (qkv, fch), the residual res2 and the cheap layernorm statistics
    k.ln1 = false;
    k.atty = false;
    k.att_state = false;
    k.ln2 = false;
    k.fch_gelu = false;
  }
  return k;
}

void* Activations::take(size_t bytes) {
  void* p = be_.alloc(bytes, MemCat::activation);
  owned_.push_back(p);
  return p;
}

Activations::Activations(Backend& be, const GPTConfig& cfg, const RecomputePolicy& policy, int B_, int T_)
    : B(B_), T(T_), be_(be) {
  const size_t N = (size_t)B * T, C = cfg.channels, L = cfg.num_layers, cs = be.compute_size();
  const size_t state_bytes = be.attention_state_bytes(B, T, cfg.num_heads);
  for (size_t l = 0; l <= L; l++) resid.push_back(take(N * C * cs));

  // The shared scratch set, allocated only if some layer recomputes something.
  BlockActs scratch;
  bool need_scratch = false;
  for (size_t l = 0; l < L; l++) {
    kept.push_back(KeptFields::for_layer(policy, (int)l));
    need_scratch |= !kept.back().all();
  }
  auto make = [&](BlockActs& a, const KeptFields& k, bool is_scratch) {
    auto pick = [&](bool keep_here, size_t bytes, void* shared) { return (keep_here != is_scratch) ? take(bytes) : shared; };
    a.ln1 = pick(k.ln1, N * C * cs, scratch.ln1);
    a.ln1_mean = (float*)pick(k.ln1_stats, N * 4, scratch.ln1_mean);
    a.ln1_rstd = (float*)pick(k.ln1_stats, N * 4, scratch.ln1_rstd);
    a.qkv = pick(k.qkv, N * 3 * C * cs, scratch.qkv);
    a.atty = pick(k.atty, N * C * cs, scratch.atty);
    a.att_state = pick(k.att_state, state_bytes, scratch.att_state);
    a.res2 = pick(k.res2, N * C * cs, scratch.res2);
    a.ln2 = pick(k.ln2, N * C * cs, scratch.ln2);
    a.ln2_mean = (float*)pick(k.ln2_stats, N * 4, scratch.ln2_mean);
    a.ln2_rstd = (float*)pick(k.ln2_stats, N * 4, scratch.ln2_rstd);
    a.fch = pick(k.fch, N * 4 * C * cs, scratch.fch);
    a.fch_gelu = pick(k.fch_gelu, N * 4 * C * cs, scratch.fch_gelu);
  };
  if (need_scratch) {
    // scratch: allocate exactly the fields that at least one layer recomputes
    KeptFields any_recomputed{true, true, true, true, true, true, true, true, true, true};
    for (const auto& k : kept) {
      any_recomputed.ln1 &= k.ln1; any_recomputed.ln1_stats &= k.ln1_stats; any_recomputed.qkv &= k.qkv;
      any_recomputed.atty &= k.atty; any_recomputed.att_state &= k.att_state; any_recomputed.res2 &= k.res2;
      any_recomputed.ln2 &= k.ln2; any_recomputed.ln2_stats &= k.ln2_stats; any_recomputed.fch &= k.fch;
      any_recomputed.fch_gelu &= k.fch_gelu;
    }
    make(scratch, any_recomputed, true);
  }
  blocks.resize(L);
  for (size_t l = 0; l < L; l++) make(blocks[l], kept[l], false);

  lnf = take(N * C * cs);
  lnf_mean = (float*)take(N * 4);
  lnf_rstd = (float*)take(N * 4);
  logits = take(N * cfg.padded_vocab_size * cs);
  losses = (float*)take(N * 4);
  inputs = (int*)take(N * 4);
  targets = (int*)take(N * 4);
  dres = take(N * C * cs);
  dwide_a = take(N * 4 * C * cs);
  dwide_b = take(N * 4 * C * cs);
  dnarrow_a = take(N * C * cs);
  dnarrow_b = take(N * C * cs);
}

Activations::~Activations() {
  for (void* p : owned_) be_.free(p);
}

}  // namespace gpt
