// The activation plan and its allocation (activations.h). The constructor allocates exactly the plan's
// buffers, so the plan's totals are what the ledger records under `activation` (device and host domains).
#include "src/model/activations.h"

#include <algorithm>
#include <utility>

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
                                int64_t state_bytes, bool offload, TpOptions tp, int64_t replicated_grad_elems) {
  // N rows; n of them between the products (tp.local_rows); Cl channels of a product's split side
  const int64_t N = sat_mul({B, T}), n = tp.sequence_parallel ? N / tp.size : N, C = cfg.channels, L = cfg.num_layers;
  const int64_t Cl = C / tp.size;
  ActivationPlan p;
  auto set = [&](BlockField f, int64_t bytes) { p.field_bytes[(int)f] = bytes; };
  set(BlockField::ln1, sat_mul({N, C, cs}));
  set(BlockField::ln1_stats, sat_mul({2, n, 4}));
  set(BlockField::qkv, sat_mul({N, 3 * Cl, cs}));
  set(BlockField::atty, sat_mul({N, Cl, cs}));
  set(BlockField::att_state, state_bytes);
  set(BlockField::res2, sat_mul({n, C, cs}));
  set(BlockField::ln2, sat_mul({N, C, cs}));
  set(BlockField::ln2_stats, sat_mul({2, n, 4}));
  set(BlockField::fch, sat_mul({N, 4 * Cl, cs}));
  set(BlockField::fch_gelu, sat_mul({N, 4 * Cl, cs}));
  for (int l = 0; l < L; l++) {
    p.kept.push_back(KeptFields::for_layer(policy, l));
    for (int f = 0; f < kBlockFields; f++) p.scratch[f] |= !p.kept.back().keep[f];
  }
  p.resid = sat_mul({n, C, cs});
  p.row_f32 = sat_mul({N, 4});
  p.row_local = sat_mul({n, 4});
  p.narrow = sat_mul({N, C, cs});
  p.dres = sat_mul({n, C, cs});
  p.narrow_local = sat_mul({N, Cl, cs});
  p.wide = sat_mul({N, 4 * Cl, cs});
  p.logits = sat_mul({N, cfg.padded_vocab_size / tp.size, cs});
  p.host_row = sat_mul({N, 4});
  if (tp.size > 1) p.loss_stats = sat_mul({N, 4});
  if (tp.sequence_parallel) {
    p.tp_rows = sat_mul({N, C, cs});
    p.ln_local = sat_mul({n, C, cs});
    p.replicated_grads = sat_mul({replicated_grad_elems, 4});
  }
  if (offload) {
    p.ring = (int)std::min<int64_t>(3, L);
    p.slot_field.resize((size_t)p.ring);
    for (int l = 0; l < L; l++)
      for (int f = 0; f < kBlockFields; f++) p.slot_field[l % p.ring][f] |= p.kept[l].keep[f];
  }
  return p;
}

int64_t ActivationPlan::layer_kept_bytes(int l) const {
  int64_t t = resid;
  for (int f = 0; f < kBlockFields; f++)
    if (kept[l].keep[f]) t = sat_add({t, field_bytes[f]});
  return t;
}

// Without offload every layer's kept buffers and the L+1 residual buffers are on the device; with it, ring
// slots of them (plus the last block's output).
int64_t ActivationPlan::total_bytes() const {
  int64_t t = 0;
  for (int f = 0; f < kBlockFields; f++) {
    int64_t copies = scratch[f] ? 1 : 0;
    if (ring > 0) {
      for (const auto& s : slot_field) copies += s[f];
    } else {
      for (const KeptFields& k : kept) copies += k.keep[f];
    }
    t = sat_add({t, sat_mul({copies, field_bytes[f]})});
  }
  const int64_t L = (int64_t)kept.size(), resids = ring > 0 ? ring + 1 : L + 1;
  return sat_add({t, sat_mul({resids, resid}), sat_mul({3, row_f32}), sat_mul({2, row_local}), sat_mul({2, narrow}), dres,
                  narrow_local, sat_mul({2, wide}), logits, loss_sum, sat_mul({3, loss_stats}), tp_rows, ln_local,
                  replicated_grads});
}

int64_t ActivationPlan::host_bytes() const {
  int64_t t = sat_mul({2, host_row});
  const int L = (int)kept.size();
  if (ring > 0)
    for (int l = 0; l < L; l++)
      if (!ActivationRing::stays(l, L, ring)) t = sat_add({t, layer_kept_bytes(l)});
  return t;
}

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

namespace {
// The buffers of field f (two halves for a stats field) and their bytes.
std::vector<std::pair<void*, size_t>> field_buffers(const BlockActs& a, BlockField f, size_t bytes) {
  switch (f) {
    case BlockField::ln1: return {{a.ln1, bytes}};
    case BlockField::ln1_stats: return {{a.ln1_mean, bytes / 2}, {a.ln1_rstd, bytes / 2}};
    case BlockField::qkv: return {{a.qkv, bytes}};
    case BlockField::atty: return {{a.atty, bytes}};
    case BlockField::att_state: return {{a.att_state, bytes}};
    case BlockField::res2: return {{a.res2, bytes}};
    case BlockField::ln2: return {{a.ln2, bytes}};
    case BlockField::ln2_stats: return {{a.ln2_mean, bytes / 2}, {a.ln2_rstd, bytes / 2}};
    case BlockField::fch: return {{a.fch, bytes}};
    case BlockField::fch_gelu: return {{a.fch_gelu, bytes}};
    case BlockField::count: break;
  }
  return {};
}
}  // namespace

void Activations::place_ring(const ActivationPlan& p, const BlockActs& scratch) {
  const int L = (int)kept.size();
  std::vector<void*> slot_resid;   // [slot] (N, C): the input of the slot's layer
  std::vector<BlockActs> slots(p.ring);  // [slot]: the fields some layer keeps
  for (int s = 0; s < p.ring; s++) {
    slot_resid.push_back(take((size_t)p.resid));
    for (int f = 0; f < kBlockFields; f++)
      if (p.slot_field[s][f]) place(slots[s], (BlockField)f, true, scratch, p);
  }
  std::vector<std::vector<ActTransfer>> transfers((size_t)L);  // [layer]
  for (int l = 0; l < L; l++) {
    const int s = l % p.ring;
    const bool copied = !ActivationRing::stays(l, L, p.ring);  // else it never leaves its slot: no host copy
    resid.push_back(slot_resid[s]);
    if (copied) transfers[l].push_back({slot_resid[s], take_host((size_t)p.resid), (size_t)p.resid});
    for (int f = 0; f < kBlockFields; f++) {
      place(blocks[l], (BlockField)f, false, kept[l].keep[f] ? slots[s] : scratch, p);
      if (!kept[l].keep[f] || !copied) continue;
      for (auto [dev, bytes] : field_buffers(blocks[l], (BlockField)f, (size_t)p.field_bytes[f]))
        transfers[l].push_back({dev, take_host(bytes), bytes});
    }
  }
  resid.push_back(take((size_t)p.resid));  // the last block's output, read by the final layernorm
  ring = std::make_unique<ActivationRing>(be_, p.ring, std::move(transfers));
}

Activations::Activations(Backend& be, const GPTConfig& cfg, const RecomputePolicy& policy, int B_, int T_,
                         bool offload, TpOptions tp, int64_t replicated_grad_elems)
    : B(B_), T(T_), be_(be) {
  const ActivationPlan p =
      plan_activations(cfg, policy, B, T, (int64_t)be.compute_size(),
                       (int64_t)be.attention_state_bytes(B, T, cfg.num_heads / tp.size), offload, tp, replicated_grad_elems);
  const int L = cfg.num_layers;
  BlockActs scratch;  // the shared buffers of the fields some layer recomputes
  kept = p.kept;
  blocks.resize(L);
  if (p.ring > 0) {
    for (int f = 0; f < kBlockFields; f++)
      if (p.scratch[f]) place(scratch, (BlockField)f, true, scratch, p);
    place_ring(p, scratch);
  } else {
    for (int l = 0; l <= L; l++) resid.push_back(take((size_t)p.resid));
    for (int f = 0; f < kBlockFields; f++)
      if (p.scratch[f]) place(scratch, (BlockField)f, true, scratch, p);
    for (int l = 0; l < L; l++)
      for (int f = 0; f < kBlockFields; f++) place(blocks[l], (BlockField)f, kept[l].keep[f], scratch, p);
  }

  lnf = take((size_t)p.narrow);
  lnf_mean = static_cast<float*>(take((size_t)p.row_local));
  lnf_rstd = static_cast<float*>(take((size_t)p.row_local));
  logits = take((size_t)p.logits);
  losses = static_cast<float*>(take((size_t)p.row_f32));
  inputs = static_cast<int*>(take((size_t)p.row_f32));
  targets = static_cast<int*>(take((size_t)p.row_f32));
  dres = take((size_t)p.dres);
  dwide_a = take((size_t)p.wide);
  dwide_b = take((size_t)p.wide);
  dnarrow_a = take((size_t)p.narrow);
  dnarrow_b = take((size_t)p.narrow_local);
  if (p.loss_stats) {  // one block: the target logits and the sums side by side, reduced together
    loss_max = static_cast<float*>(take(3 * (size_t)p.loss_stats));
    loss_target = loss_max + (size_t)B * T;
    loss_sum_exp = loss_target + (size_t)B * T;
  }
  if (p.tp_rows) tp_rows = take((size_t)p.tp_rows);
  if (p.ln_local) ln_local = take((size_t)p.ln_local);
  if (p.replicated_grads) replicated_grads = static_cast<float*>(take((size_t)p.replicated_grads));
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
