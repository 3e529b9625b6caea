// The parameter layout: the model's parameters grouped into sharding units, each ONE flat fp32 buffer with
// named views (the FlatParameter idea of FSDP). Units in forward order:
//   unit 0          embed    wte (Vp,C), wpe (maxT,C), lnfw (C), lnfb (C)   the root unit
//   unit 1 ..       the blocks, grouped by the wrap policy (model/wrap.h): "block3" holds one block,
//                   "blocks4-7" four; each block's tensors ln1w ln1b qkvw qkvb attprojw attprojb ln2w ln2b
//                   fcw fcb fcprojw fcprojb lie together, blocks in layer order
// The LM head reuses wte (weight tying), so unit 0 is used first and last; the final layernorm, which runs
// right before the LM head, joins it: on its own it would be a unit of 2C parameters costing two
// latency-bound collectives per micro-step. The root rule: Note [root unit] in src/fsdp/param_side.h.
// A legacy layout (checkpoint files of version 2 and earlier) has one block per unit and the final layernorm
// in a last unit of its own, "head"; it exists to read those files (Layout::locate), never to train.
// Model files (llm.c format) and checkpoints of another wrap are converted tensor by tensor (locate).
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "src/model/config.h"
#include "src/model/tp_shape.h"
#include "src/model/wrap.h"

namespace gpt {

// The two passes of a step. Each acquires the units in its own order (Layout::pass_order).
enum class Pass { forward, backward };

struct TensorSpec {
  std::string name;       // "wte", "qkvw", ...
  int64_t offset = 0;     // element offset inside the unit's flat buffer
  int64_t numel = 0;
  bool weight_decay = false;  // AdamW decays matrices only (2-D weights incl. embeddings), as GPT-2 recipes do
  int64_t rows = 1, cols = 1;  // this rank's shape (with tensor parallelism, its slice); numel = rows * cols
  int layer = -1;         // the block it belongs to, -1 for wte, wpe, lnfw, lnfb
  TpSplit split = TpSplit::none;  // how a tensor-parallel group splits it (tp_shape.h)
  int parts = 1;          // split rows: the row blocks split apart (3 for qkvw and qkvb)
};

struct UnitSpec {
  std::string name;  // "embed", "block3", "blocks4-7", "head" (legacy)
  int64_t numel = 0;
  std::vector<TensorSpec> tensors;
  int first_layer = -1, last_layer = -1;  // the blocks it holds, -1 for the root (and the legacy head)
  const TensorSpec& tensor(const std::string& name) const;  // the first of that name; throws when absent
};

// Offsets of a block's tensors inside its unit (Layout::block_offsets), so model code reads views without string
// lookups.
struct BlockOffsets {
  int64_t ln1w, ln1b, qkvw, qkvb, attprojw, attprojb, ln2w, ln2b, fcw, fcb, fcprojw, fcprojb;
};

// Where a tensor lies: its unit and its spec there.
struct TensorPlace {
  int unit = -1;
  const TensorSpec* spec = nullptr;
};

// One run of elements of a unit of one layout found in a unit of another (Layout::map_range).
struct UnitSpan {
  int64_t dst = 0;   // element offset in the destination unit
  int src_unit = 0;  // unit of the source layout
  int64_t src = 0;   // element offset there
  int64_t numel = 0;
};

class Layout {
 public:
  // tp: this rank's place in its tensor-parallel group; every tensor then has this rank's slice's shape, and
  // (tp.size > 1) each unit keeps its tensors split over the group first and its replicated ones after them
  // (replicated_span), so the partial gradients of the replicated ones are one span to sum over the group.
  explicit Layout(const GPTConfig& cfg, const WrapPolicy& wrap = {}, TpShape tp = {});
  // The layout of checkpoint files of version 2 and earlier (see above).
  static Layout legacy(const GPTConfig& cfg);
  const GPTConfig& config() const { return cfg_; }
  const WrapPolicy& wrap() const { return wrap_; }
  const TpShape& tp() const { return tp_; }
  int num_units() const { return (int)units_.size(); }
  const UnitSpec& unit(int u) const { return units_[u]; }
  int embed_unit() const { return 0; }
  // The root unit: the one both passes hold from their first acquire to their last release (the tied
  // embeddings). What the engine does with it: Note [root unit] in src/fsdp/param_side.h. The engine learns
  // which unit it is here, never by a unit number.
  int root_unit() const { return embed_unit(); }
  bool is_root(int u) const { return u == root_unit(); }
  // The unit holding block l, and block l's first element inside it.
  int layer_unit(int l) const { return layer_unit_[l]; }
  int64_t layer_offset(int l) const { return layer_offset_[l]; }
  // Block l's tensors' offsets inside its unit (one after another from layer_offset(l), unless tp.size > 1
  // puts its whole tensors in the unit's replicated span).
  const BlockOffsets& block_offsets(int l) const { return block_at_[l]; }
  // The span of unit u whose tensors every rank of the tensor-parallel group holds whole (tp.size > 1; empty
  // otherwise): [first, first + numel).
  struct Span {
    int64_t first = 0, numel = 0;
  };
  Span replicated_span(int u) const { return replicated_[u]; }
  // The vocabulary rows of wte this rank holds: [vocab_lo(), vocab_lo() + vocab_rows()).
  int vocab_lo() const { return tp_.rank * vocab_rows(); }
  int vocab_rows() const { return cfg_.padded_vocab_size / tp_.size; }
  // Block l is the first (forward acquires its unit there) or the last (backward acquires it there) of its unit.
  bool opens_unit(int l) const { return units_[layer_unit_[l]].first_layer == l; }
  bool closes_unit(int l) const { return units_[layer_unit_[l]].last_layer == l; }
  int64_t block_numel() const { return block_numel_; }
  // Offsets in the root unit.
  int64_t wte_offset() const { return 0; }
  int64_t wpe_offset() const { return (int64_t)vocab_rows() * cfg_.channels; }
  int64_t lnf_offset() const { return wpe_offset() + (int64_t)cfg_.max_seq_len * cfg_.channels; }  // lnfw, then lnfb
  int64_t total_numel() const;      // Ψ: all parameters
  std::vector<int64_t> unit_numels() const;  // [unit] numel: what the engine's geometry is made of
  // The units in the order a pass of the model acquires them (and the engine prefetches them):
  //   forward:  embed, the block units in layer order    (the final layernorm and the LM head then use embed)
  //   backward: embed (the LM head), the block units in reverse   (then the encoder, with embed again)
  const std::vector<int>& pass_order(Pass pass) const { return order_[(int)pass]; }
  int pass_position(Pass pass, int u) const { return position_[(int)pass][u]; }  // u's index in pass_order(pass)
  // Tensor `name` of block `layer` (-1: wte, wpe, lnfw, lnfb). Throws when absent.
  TensorPlace locate(const std::string& name, int layer) const;
  // Elements [lo, hi) of unit u of this layout as runs of units of `src`, tensor by tensor, runs contiguous in
  // both merged (so a unit found whole in `src` is one run); a unit's padding past its last tensor has no
  // source and is left out. Both layouts must be of the same model.
  std::vector<UnitSpan> map_range(int u, int64_t lo, int64_t hi, const Layout& src) const;

 private:
  Layout(const GPTConfig& cfg, const WrapPolicy& wrap, TpShape tp, bool legacy_head);
  GPTConfig cfg_;
  WrapPolicy wrap_;
  TpShape tp_;
  std::vector<UnitSpec> units_;
  int64_t block_numel_ = 0;
  std::vector<int> layer_unit_;          // [layer]
  std::vector<int64_t> layer_offset_;    // [layer]
  std::vector<BlockOffsets> block_at_;   // [layer]: offsets inside its unit
  std::vector<Span> replicated_;         // [unit]
  std::vector<int> order_[2];            // [pass]: unit indices
  std::vector<int> position_[2];         // [pass][unit]: its index in order_[pass]
  // locate's index, (unit, tensor) pairs: a block's tensors by (layer, their place in a block), the others by name
  std::vector<std::pair<int, int>> block_index_;  // [layer * tensors per block + k]
  std::vector<std::pair<int, int>> other_index_;  // wte, wpe, lnfw, lnfb (layer -1)
};

// Throws the one-line error for a tensor-parallel group the model cannot be split over (--tp must divide the
// heads and the padded vocabulary).
void check_tp_shape(const GPTConfig& cfg, TpShape tp);

// Unit u of `to` from the whole units of `from` (src[u] = unit u's numel floats), a layout of the same model
// under another wrap, tensor by tensor; out (unit u's numel floats) must start zeroed. `to` may be a
// tensor-parallel rank's layout (its slices are cut from `from`'s whole tensors; `from` has none).
void copy_unit(const Layout& to, int u, const Layout& from, const std::vector<const float*>& src, float* out);

// Where a tensor-parallel rank's slice of a tensor lies in the whole tensor: runs of elements, offsets from
// each tensor's first element (`local`: the rank's TensorSpec, in a layout of TpShape tp). A tensor the group
// keeps whole is one run.
struct TpRun {
  int64_t local = 0, full = 0, numel = 0;
};
std::vector<TpRun> tp_runs(const TensorSpec& local, TpShape tp);
// The inverse: which rank of a group of `size` holds element `full` of the whole tensor (a tensor the group keeps
// whole: rank 0, though every rank has it), where in its slice (`local`), and how many elements from there on
// stay in one run of that slice (`numel`). `local_spec`: any rank's TensorSpec of the tensor (all have one shape).
struct TpPlace {
  int rank = 0;
  int64_t local = 0, numel = 0;
};
TpPlace tp_place(const TensorSpec& local_spec, int size, int64_t full);
// The inverse of copy_unit's slicing: tensor-parallel rank `from.tp().rank`'s unit u (its numel floats) written
// into its place in the whole units of `to` (a layout without tensor parallelism; dst[v] = unit v's numel floats).
void scatter_unit(const Layout& from, int u, const float* src, const Layout& to, const std::vector<float*>& dst);

}  // namespace gpt
