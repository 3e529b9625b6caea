// The parameter layout: the model's parameters grouped into sharding units, each ONE flat fp32 buffer with
// named views (the FlatParameter idea of FSDP). Units in forward order:
//   unit 0          embed    wte (Vp,C), wpe (maxT,C)
//   unit 1 .. L     block[i] ln1w ln1b qkvw qkvb attprojw attprojb ln2w ln2b fcw fcb fcprojw fcprojb
//   unit L+1        head     lnfw lnfb
// The LM head reuses wte (weight tying), so unit 0 is used first and last; see fsdp/ for the rule.
// Model files (llm.c format) order tensors differently — io/model_file converts with these offsets.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "src/model/config.h"

namespace gpt {

// The two passes of a step. Each acquires the units in its own order (Layout::pass_order).
enum class Pass { forward, backward };

struct TensorSpec {
  std::string name;       // "wte", "qkvw", ...
  int64_t offset = 0;     // element offset inside the unit's flat buffer
  int64_t numel = 0;
  bool weight_decay = false;  // AdamW decays matrices only (2-D weights incl. embeddings), as GPT-2 recipes do
  int64_t rows = 1, cols = 1;  // shape for init and display; numel = rows * cols
};

struct UnitSpec {
  std::string name;  // "embed", "block3", "head"
  int64_t numel = 0;
  std::vector<TensorSpec> tensors;
  const TensorSpec& tensor(const std::string& name) const;  // throws when absent
};

// Offsets of a block's tensors (same for every block), so model code reads views without string lookups.
struct BlockOffsets {
  int64_t ln1w, ln1b, qkvw, qkvb, attprojw, attprojb, ln2w, ln2b, fcw, fcb, fcprojw, fcprojb;
};

class Layout {
 public:
  explicit Layout(const GPTConfig& cfg);
  const GPTConfig& config() const { return cfg_; }
  int num_units() const { return (int)units_.size(); }
  const UnitSpec& unit(int u) const { return units_[u]; }
  int embed_unit() const { return 0; }
  // The root unit: the one both passes hold from their first acquire to their last release (the tied
  // embeddings: the token embedding opens forward, the LM head closes it and opens backward, the encoder's
  // backward closes that). The engine gives it a gather slot of its own, gathers it once per step and reduces
  // its gradient last (FSDP's root-unit rule); it learns which unit that is here, never by a unit number.
  int root_unit() const { return embed_unit(); }
  bool is_root(int u) const { return u == root_unit(); }
  int block_unit(int layer) const { return 1 + layer; }
  int head_unit() const { return cfg_.num_layers + 1; }
  const BlockOffsets& block() const { return block_; }
  int64_t wte_offset() const { return 0; }
  int64_t wpe_offset() const { return (int64_t)cfg_.padded_vocab_size * cfg_.channels; }
  int64_t total_numel() const;      // Ψ: all parameters
  // The units in the order a pass of the model acquires them (and the engine prefetches them):
  //   forward:  embed, block0 .. block{L-1}, head         (the LM head then uses embed's tied wte)
  //   backward: embed (the LM head), head, block{L-1} .. block0   (then the encoder, with embed again)
  const std::vector<int>& pass_order(Pass pass) const { return order_[(int)pass]; }

 private:
  GPTConfig cfg_;
  std::vector<UnitSpec> units_;
  BlockOffsets block_{};
  std::vector<int> order_[2];  // [pass]: unit indices
};

}  // namespace gpt
