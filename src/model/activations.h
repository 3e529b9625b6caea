// Activation storage for one micro-batch shape (B, T). Each block's buffers are either kept per layer or
// point into one shared scratch set, as the recompute policy decides; the residual stream (every block's
// input and the final output) is always kept. All buffers are tagged `activation` in the memory ledger.
// With activation offload (--offload activations) what a layer keeps (its input and its kept fields) has a
// host copy per layer (host domain) and the device only a ring of slots (activation_ring.h), layer l's
// buffers in slot l % slots; the last block's output, read by the final layernorm, stays on the device.
#pragma once
#include <array>
#include <cstdint>
#include <memory>
#include <vector>

#include "src/backend/backend.h"
#include "src/model/activation_ring.h"
#include "src/model/config.h"
#include "src/model/recompute.h"
#include "src/model/tp_shape.h"

namespace gpt {

// One block's activations (N = B*T rows). A pointer may be shared scratch (recomputed in backward).
// With tensor parallelism over T ranks (tensor_parallel.h) the block's products hold this rank's C/T channels
// (Cl below; Cl = C without), and with sequence parallelism the residual stream and the layernorms' statistics
// this rank's n = N/T rows (n = N without); the layernorm outputs are what the column-parallel products read,
// all N rows.
struct BlockActs {
  void* ln1 = nullptr;        // (N, C)
  float* ln1_mean = nullptr;  // (n)
  float* ln1_rstd = nullptr;  // (n)
  void* qkv = nullptr;        // (N, 3Cl)
  void* atty = nullptr;       // (N, Cl)  attention output before the projection
  void* att_state = nullptr;  // backend-defined, attention_state_bytes(B, T, NH / T)
  void* res2 = nullptr;       // (n, C)   residual after attention
  void* ln2 = nullptr;        // (N, C)
  float* ln2_mean = nullptr;  // (n)
  float* ln2_rstd = nullptr;  // (n)
  void* fch = nullptr;        // (N, 4Cl) fc pre-activation
  void* fch_gelu = nullptr;   // (N, 4Cl)
};

// The BlockActs fields a layer may keep or recompute; a *_stats field is the mean and rstd pair.
enum class BlockField { ln1, ln1_stats, qkv, atty, att_state, res2, ln2, ln2_stats, fch, fch_gelu, count };
constexpr int kBlockFields = (int)BlockField::count;

// Which BlockActs fields a layer keeps (false = shared scratch, recomputed in backward).
struct KeptFields {
  std::array<bool, kBlockFields> keep;  // [BlockField]
  KeptFields() { keep.fill(true); }
  bool operator[](BlockField f) const { return keep[(int)f]; }
  bool all() const;
  static KeptFields for_layer(const RecomputePolicy& p, int layer);
};

// The bytes of every activation buffer at micro-batch (B, T): what the Activations constructor allocates
// and `gpt memplan` sums (total_bytes). N = B*T rows; cs = the compute dtype's size; n and Cl as BlockActs.
struct ActivationPlan {
  std::array<int64_t, kBlockFields> field_bytes{};  // [BlockField]: one layer's buffer (a stats field: both)
  std::vector<KeptFields> kept;                     // [layer]
  std::array<bool, kBlockFields> scratch{};         // [BlockField]: one shared buffer, as some layer drops it
  int64_t resid = 0;      // (n, C) per residual buffer, L+1 of them
  int64_t row_f32 = 0;    // (N) fp32 or int32: losses, inputs, targets
  int64_t row_local = 0;  // (n) fp32: lnf_mean, lnf_rstd
  int64_t narrow = 0;     // (N, C): lnf, dnarrow_a
  int64_t dres = 0;       // (n, C): dres
  int64_t narrow_local = 0;  // (N, Cl): dnarrow_b
  int64_t wide = 0;       // (N, 4Cl): dwide_a, dwide_b
  int64_t logits = 0;     // (N, Vp / T)
  // Tensor parallelism (tp.size > 1): the vocab-parallel loss's three per-row statistics, (N) fp32 each; with
  // sequence parallelism the gathered or reduced rows (N, C) between the collectives and the products, and a
  // layernorm's own rows (n, C) before they are gathered.
  int64_t loss_stats = 0;  // (N) fp32, three of them (0 when tp.size == 1)
  int64_t tp_rows = 0;     // (N, C) (0 without sequence parallelism)
  int64_t ln_local = 0;    // (n, C) (0 without sequence parallelism)
  // Sequence parallelism: one micro-step's partial gradients of the replicated tensors (GPT::grad_at), the root
  // unit's span and then the largest other unit's, fp32, before they are summed over the group and added into
  // the engine's gradient buffer (which may already hold earlier micro-steps': those are summed once).
  int64_t replicated_grads = 0;
  int64_t loss_sum = 8;   // one fp64: the running sum of per-token losses (GPT::take_loss_sum)
  int64_t host_row = 0;   // (N) int32 in host memory (pinned on cuda): the staging of inputs, of targets
  // Activation offload: the ring's slots (min(3, L); 0 without offload). Slot s holds a block input and
  // every field that some layer of the slot (l % ring == s) keeps (slot_field).
  int ring = 0;
  std::vector<std::array<bool, kBlockFields>> slot_field;  // [slot][BlockField]
  // The sum of every device buffer above (saturating at INT64_MAX, like the sizes themselves).
  int64_t total_bytes() const;
  // The host-domain buffers: the two token-id stagings, and with offload the kept buffers of every layer
  // but the last `ring` (which keep their slots, ActivationRing::stays).
  int64_t host_bytes() const;
  // What layer l keeps between its forward and its backward: its input and its kept fields.
  int64_t layer_kept_bytes(int l) const;
};
// offload: --offload activations (ActivationPlan::ring); attention_state_bytes for this rank's NH / tp.size heads;
// replicated_grad_elems: with sequence parallelism, the replicated-gradient scratch's elements
// (replicated_grad_scratch, gpt.h).
ActivationPlan plan_activations(const GPTConfig& cfg, const RecomputePolicy& policy, int B, int T, int64_t compute_size,
                                int64_t attention_state_bytes, bool offload = false, TpOptions tp = {},
                                int64_t replicated_grad_elems = 0);

class Activations {
 public:
  Activations(Backend& be, const GPTConfig& cfg, const RecomputePolicy& policy, int B, int T, bool offload = false,
              TpOptions tp = {}, int64_t replicated_grad_elems = 0);
  ~Activations();
  Activations(const Activations&) = delete;
  Activations& operator=(const Activations&) = delete;

  int B, T;
  std::vector<void*> resid;       // L+1 buffers (n, C): resid[l] is block l's input, resid[L] the last output
  std::vector<BlockActs> blocks;  // L
  std::vector<KeptFields> kept;   // L
  std::unique_ptr<ActivationRing> ring;  // --offload activations, else null
  void* lnf = nullptr;            // (N, C)  the LM head's input
  float* lnf_mean = nullptr;      // (n)
  float* lnf_rstd = nullptr;      // (n)
  void* logits = nullptr;         // (N, Vp / T)  overwritten by dlogits in backward
  float* losses = nullptr;        // (N)
  int* inputs = nullptr;          // (N) token ids on the device
  int* targets = nullptr;         // (N)
  double* loss_sum = nullptr;     // (1)  sum of the per-token losses of the backwards since the last read
  int* host_inputs = nullptr;     // (N) host staging (Backend::alloc_host: pinned on cuda) of inputs
  int* host_targets = nullptr;    // (N) and of targets
  // Backward scratch (activation gradients); forward uses dnarrow_a for a projection's output.
  void* dres = nullptr;           // (n, C)  gradient of the residual stream
  void* dwide_a = nullptr;        // (N, 4Cl)
  void* dwide_b = nullptr;        // (N, 4Cl)
  void* dnarrow_a = nullptr;      // (N, C)
  void* dnarrow_b = nullptr;      // (N, Cl)
  // Tensor parallelism (ActivationPlan's): null where the plan has none.
  float* loss_max = nullptr;      // (N) the vocab-parallel loss's row maxima,
  float* loss_target = nullptr;   // (N) target logits (right after loss_max),
  float* loss_sum_exp = nullptr;  // (N) and sums of exponentials (right after loss_target)
  void* tp_rows = nullptr;        // (N, C) sequence parallelism: gathered rows, or a reduction's n rows
  void* ln_local = nullptr;       // (n, C) sequence parallelism: a layernorm's output before its gather
  float* replicated_grads = nullptr;  // (replicated_grad_elems) fp32, sequence parallelism: ActivationPlan's

 private:
  Backend& be_;
  std::vector<void*> owned_, owned_host_;
  void* take(size_t bytes);
  void* take_host(size_t bytes);
  void place(BlockActs& a, BlockField f, bool own, const BlockActs& shared, const ActivationPlan& p);
  // The ring's slots, the layers' pointers into them, and each layer's host copies and transfers.
  void place_ring(const ActivationPlan& p, const BlockActs& scratch);
};

}  // namespace gpt
