// The activation plan and its allocation (activations.h). The constructor allocates exactly the plan's
// buffers, so the plan's totals are what the ledger records under `activation` (device and host domains).
#include "src/model/activations.h"

#include "src/core/size_math.h"

namespace gpt {

bool KeptFields::all() const {
  for (bool k : keep)
    if (!k) return false;
  return true;
}

KeptFields KeptFields::for_layer(const RecomputePolicy& p, int layer) {
  KeptFields k;
  if (p.layer_recomputes_all(layer)) {
    k.keep.fill(false);
  } else if (p.selective()) {
    // keep the matmul outputs (qkv, fch), the residual res2 and the cheap layernorm statistics
    for (BlockField f : {BlockField::ln1, BlockField::atty, BlockField::att_state, BlockField::ln2, BlockField::fch_gelu})
      k.keep[(int)f] = false;
  }
  return k;
}

ActivationPlan plan_activations(const GPTConfig& cfg, const RecomputePolicy& policy, int B, int T, int64_t cs,
                                int64_t state_bytes) {
  const int64_t N = sat_mul({B, T}), C = cfg.channels, L = cfg.num_layers;
  ActivationPlan p;
  auto set = [&](BlockField f, int64_t bytes) { p.field_bytes[(int)f] = bytes; };
  set(BlockField::ln1, sat_mul({N, C, cs}));
  set(BlockField::ln1_stats, sat_mul({2, N, 4}));
  set(BlockField::qkv, sat_mul({N, 3 * C, cs}));
  set(BlockField::atty, sat_mul({N, C, cs}));
  set(BlockField::att_state, state_bytes);
  set(BlockField::res2, sat_mul({N, C, cs}));
  set(BlockField::ln2, sat_mul({N, C, cs}));
  set(BlockField::ln2_stats, sat_mul({2, N, 4}));
  set(BlockField::fch, sat_mul({N, 4 * C, cs}));
  set(BlockField::fch_gelu, sat_mul({N, 4 * C, cs}));
  for (int l = 0; l < L; l++) {
    p.kept.push_back(KeptFields::for_layer(policy, l));
    for (int f = 0; f < kBlockFields; f++) p.scratch[f] |= !p.kept.back().keep[f];
  }
  p.resid = sat_mul({N, C, cs});
  p.row_f32 = sat_mul({N, 4});
  p.narrow = sat_mul({N, C, cs});
  p.wide = sat_mul({N, 4 * C, cs});
  p.logits = sat_mul({N, cfg.padded_vocab_size, cs});
  p.host_row = sat_mul({N, 4});
  return p;
}

int64_t ActivationPlan::total_bytes() const {
  int64_t t = 0;
  for (int f = 0; f < kBlockFields; f++) {
    int64_t layers_keeping = 0;
    for (const KeptFields& k : kept) layers_keeping += k.keep[f];
    t = sat_add({t, sat_mul({layers_keeping + (scratch[f] ? 1 : 0), field_bytes[f]})});
  }
  const int64_t L = (int64_t)kept.size();
  return sat_add({t, sat_mul({L + 1, resid}), sat_mul({5, row_f32}), sat_mul({4, narrow}), sat_mul({2, wide}), logits,
                  loss_sum});
}

int64_t ActivationPlan::host_bytes() const { return sat_mul({2, host_row}); }

void* Activations::take(size_t bytes) {
  void* p = be_.alloc(bytes, MemCat::activation);
  owned_.push_back(p);
  return p;
}

void* Activations::take_host(size_t bytes) {
  void* p = be_.alloc_host(bytes, MemCat::activation);
  owned_host_.push_back(p);
  return p;
}

// Sets a's pointer for field f: a buffer of its own when `own`, else the shared one from `shared`.
void Activations::place(BlockActs& a, BlockField f, bool own, const BlockActs& shared, const ActivationPlan& p) {
  const size_t bytes = (size_t)p.field_bytes[(int)f];
  auto one = [&](void*& dst, void* from_shared) { dst = own ? take(bytes) : from_shared; };
  auto two = [&](float*& mean, float*& rstd, float* m, float* r) {  // a stats field: two (N) fp32 halves
    mean = own ? static_cast<float*>(take(bytes / 2)) : m;
    rstd = own ? static_cast<float*>(take(bytes / 2)) : r;
  };
  switch (f) {
    case BlockField::ln1: return one(a.ln1, shared.ln1);
    case BlockField::ln1_stats: return two(a.ln1_mean, a.ln1_rstd, shared.ln1_mean, shared.ln1_rstd);
    case BlockField::qkv: return one(a.qkv, shared.qkv);
    case BlockField::atty: return one(a.atty, shared.atty);
    case BlockField::att_state: return one(a.att_state, shared.att_state);
    case BlockField::res2: return one(a.res2, shared.res2);
    case BlockField::ln2: return one(a.ln2, shared.ln2);
    case BlockField::ln2_stats: return two(a.ln2_mean, a.ln2_rstd, shared.ln2_mean, shared.ln2_rstd);
    case BlockField::fch: return one(a.fch, shared.fch);
    case BlockField::fch_gelu: return one(a.fch_gelu, shared.fch_gelu);
    case BlockField::count: break;
  }
}

Activations::Activations(Backend& be, const GPTConfig& cfg, const RecomputePolicy& policy, int B_, int T_)
    : B(B_), T(T_), be_(be) {
  const ActivationPlan p = plan_activations(cfg, policy, B, T, (int64_t)be.compute_size(),
                                            (int64_t)be.attention_state_bytes(B, T, cfg.num_heads));
  const int L = cfg.num_layers;
  for (int l = 0; l <= L; l++) resid.push_back(take((size_t)p.resid));
  BlockActs scratch;  // the shared buffers of the fields some layer recomputes
  for (int f = 0; f < kBlockFields; f++)
    if (p.scratch[f]) place(scratch, (BlockField)f, true, scratch, p);
  kept = p.kept;
  blocks.resize(L);
  for (int l = 0; l < L; l++)
    for (int f = 0; f < kBlockFields; f++) place(blocks[l], (BlockField)f, kept[l].keep[f], scratch, p);

  lnf = take((size_t)p.narrow);
  lnf_mean = static_cast<float*>(take((size_t)p.row_f32));
  lnf_rstd = static_cast<float*>(take((size_t)p.row_f32));
  logits = take((size_t)p.logits);
  losses = static_cast<float*>(take((size_t)p.row_f32));
  inputs = static_cast<int*>(take((size_t)p.row_f32));
  targets = static_cast<int*>(take((size_t)p.row_f32));
  dres = take((size_t)p.narrow);
  dwide_a = take((size_t)p.wide);
  dwide_b = take((size_t)p.wide);
  dnarrow_a = take((size_t)p.narrow);
  dnarrow_b = take((size_t)p.narrow);
  loss_sum = static_cast<double*>(take((size_t)p.loss_sum));
  be.zero(loss_sum, (size_t)p.loss_sum);
  host_inputs = static_cast<int*>(take_host((size_t)p.host_row));
  host_targets = static_cast<int*>(take_host((size_t)p.host_row));
}

Activations::~Activations() {
  for (void* p : owned_) be_.free(p);
  for (void* p : owned_host_) be_.free_host(p);
}

}  // namespace gpt
