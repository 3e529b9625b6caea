// Builds the per-unit flat layout described in layout.h.
#include "src/model/layout.h"

#include "src/core/check.h"

namespace gpt {

const TensorSpec& UnitSpec::tensor(const std::string& n) const {
  for (const auto& t : tensors)
    if (t.name == n) return t;
  fail("layout: unit ", name, " has no tensor ", n);
}

namespace {
int64_t add(UnitSpec& u, const std::string& name, int64_t rows, int64_t cols, bool decay) {
  TensorSpec t;
  t.name = name;
  t.offset = u.numel;
  t.rows = rows;
  t.cols = cols;
  t.numel = rows * cols;
  t.weight_decay = decay;
  u.tensors.push_back(t);
  u.numel += t.numel;
  return t.offset;
}
}  // namespace

Layout::Layout(const GPTConfig& cfg) : cfg_(cfg) {
  const int64_t C = cfg.channels, Vp = cfg.padded_vocab_size, maxT = cfg.max_seq_len;
  GPT_CHECK(Vp > 0, "layout: config not finalized");
  UnitSpec embed;
  embed.name = "embed";
  add(embed, "wte", Vp, C, true);
  add(embed, "wpe", maxT, C, true);
  units_.push_back(embed);

  for (int l = 0; l < cfg.num_layers; l++) {
    UnitSpec b;
    b.name = str("block", l);
    block_.ln1w = add(b, "ln1w", 1, C, false);
    block_.ln1b = add(b, "ln1b", 1, C, false);
    block_.qkvw = add(b, "qkvw", 3 * C, C, true);
    block_.qkvb = add(b, "qkvb", 1, 3 * C, false);
    block_.attprojw = add(b, "attprojw", C, C, true);
    block_.attprojb = add(b, "attprojb", 1, C, false);
    block_.ln2w = add(b, "ln2w", 1, C, false);
    block_.ln2b = add(b, "ln2b", 1, C, false);
    block_.fcw = add(b, "fcw", 4 * C, C, true);
    block_.fcb = add(b, "fcb", 1, 4 * C, false);
    block_.fcprojw = add(b, "fcprojw", C, 4 * C, true);
    block_.fcprojb = add(b, "fcprojb", 1, C, false);
    units_.push_back(b);
  }

  UnitSpec head;
  head.name = "head";
  add(head, "lnfw", 1, C, false);
  add(head, "lnfb", 1, C, false);
  units_.push_back(head);

  for (int u = 0; u < num_units(); u++) order_[(int)Pass::forward].push_back(u);
  order_[(int)Pass::backward].push_back(embed_unit());
  for (int u = head_unit(); u > embed_unit(); u--) order_[(int)Pass::backward].push_back(u);
}

int64_t Layout::total_numel() const {
  int64_t n = 0;
  for (const auto& u : units_) n += u.numel;
  return n;
}

}  // namespace gpt
