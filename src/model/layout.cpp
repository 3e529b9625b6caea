// Builds the per-unit flat layout described in layout.h, and maps tensors between two layouts of one model.
#include "src/model/layout.h"

#include <algorithm>

#include "src/core/check.h"

namespace gpt {

const TensorSpec& UnitSpec::tensor(const std::string& n) const {
  for (const auto& t : tensors)
    if (t.name == n) return t;
  fail("layout: unit ", name, " has no tensor ", n);
}

namespace {
int64_t add(UnitSpec& u, const std::string& name, int64_t rows, int64_t cols, bool decay, int layer) {
  TensorSpec t;
  t.name = name;
  t.offset = u.numel;
  t.rows = rows;
  t.cols = cols;
  t.numel = rows * cols;
  t.weight_decay = decay;
  t.layer = layer;
  u.tensors.push_back(t);
  u.numel += t.numel;
  return t.offset;
}

void add_lnf(UnitSpec& u, int64_t C) {
  add(u, "lnfw", 1, C, false, -1);
  add(u, "lnfb", 1, C, false, -1);
}

// Appends block l's tensors to u; returns their offsets relative to the block's first element.
BlockOffsets add_block(UnitSpec& u, int l, int64_t C) {
  const int64_t at = u.numel;
  BlockOffsets o;
  o.ln1w = add(u, "ln1w", 1, C, false, l) - at;
  o.ln1b = add(u, "ln1b", 1, C, false, l) - at;
  o.qkvw = add(u, "qkvw", 3 * C, C, true, l) - at;
  o.qkvb = add(u, "qkvb", 1, 3 * C, false, l) - at;
  o.attprojw = add(u, "attprojw", C, C, true, l) - at;
  o.attprojb = add(u, "attprojb", 1, C, false, l) - at;
  o.ln2w = add(u, "ln2w", 1, C, false, l) - at;
  o.ln2b = add(u, "ln2b", 1, C, false, l) - at;
  o.fcw = add(u, "fcw", 4 * C, C, true, l) - at;
  o.fcb = add(u, "fcb", 1, 4 * C, false, l) - at;
  o.fcprojw = add(u, "fcprojw", C, 4 * C, true, l) - at;
  o.fcprojb = add(u, "fcprojb", 1, C, false, l) - at;
  return o;
}
}  // namespace

Layout::Layout(const GPTConfig& cfg, const WrapPolicy& wrap) : Layout(cfg, wrap, false) {}

Layout Layout::legacy(const GPTConfig& cfg) { return Layout(cfg, WrapPolicy{}, true); }

Layout::Layout(const GPTConfig& cfg, const WrapPolicy& wrap, bool legacy_head) : cfg_(cfg), wrap_(wrap) {
  const int64_t C = cfg.channels, Vp = cfg.padded_vocab_size, maxT = cfg.max_seq_len;
  const int L = cfg.num_layers;
  GPT_CHECK(Vp > 0, "layout: config not finalized");
  UnitSpec embed;
  embed.name = "embed";
  add(embed, "wte", Vp, C, true, -1);
  add(embed, "wpe", maxT, C, true, -1);
  if (!legacy_head) add_lnf(embed, C);
  units_.push_back(embed);

  block_numel_ = 12 * C * C + 13 * C;  // qkv 3C^2+3C, attproj C^2+C, fc 4C^2+4C, fcproj 4C^2+C, two layernorms 4C
  int l = 0;
  for (int n : wrap.groups(L, block_numel_)) {
    UnitSpec b;
    b.first_layer = l;
    b.last_layer = l + n - 1;
    b.name = n == 1 ? str("block", l) : str("blocks", l, "-", l + n - 1);
    for (; l <= b.last_layer; l++) {
      layer_unit_.push_back((int)units_.size());
      layer_offset_.push_back(b.numel);
      block_ = add_block(b, l, C);
    }
    units_.push_back(b);
  }
  if (legacy_head) {
    UnitSpec head;
    head.name = "head";
    add_lnf(head, C);
    units_.push_back(head);
  }
  for (int u = 0; u < num_units(); u++) {
    order_[(int)Pass::forward].push_back(u);
    for (int t = 0; t < (int)units_[u].tensors.size(); t++)
      index_[{units_[u].tensors[t].layer, units_[u].tensors[t].name}] = {u, t};
  }
  order_[(int)Pass::backward].push_back(root_unit());
  for (int u = num_units() - 1; u > root_unit(); u--) order_[(int)Pass::backward].push_back(u);
  for (int p = 0; p < 2; p++) {
    position_[p].assign(num_units(), -1);
    for (int i = 0; i < (int)order_[p].size(); i++) position_[p][order_[p][i]] = i;
  }
}

std::vector<int64_t> Layout::unit_numels() const {
  std::vector<int64_t> n;
  for (const UnitSpec& u : units_) n.push_back(u.numel);
  return n;
}

int64_t Layout::total_numel() const {
  int64_t n = 0;
  for (const auto& u : units_) n += u.numel;
  return n;
}

TensorPlace Layout::locate(const std::string& name, int layer) const {
  auto it = index_.find({layer, name});
  GPT_CHECK(it != index_.end(), "layout: no tensor ", name, layer >= 0 ? str(" in block ", layer) : std::string());
  return {it->second.first, &units_[it->second.first].tensors[it->second.second]};
}

std::vector<UnitSpan> Layout::map_range(int u, int64_t lo, int64_t hi, const Layout& src) const {
  GPT_CHECK(src.cfg_ == cfg_, "layout: map_range between layouts of two models");
  std::vector<UnitSpan> spans;
  for (const TensorSpec& t : units_[u].tensors) {
    const int64_t a = std::max(lo, t.offset), b = std::min(hi, t.offset + t.numel);
    if (a >= b) continue;
    const TensorPlace from = src.locate(t.name, t.layer);
    const UnitSpan next{a, from.unit, from.spec->offset + (a - t.offset), b - a};
    UnitSpan* last = spans.empty() ? nullptr : &spans.back();
    if (last && last->src_unit == next.src_unit && last->dst + last->numel == next.dst &&
        last->src + last->numel == next.src) {
      last->numel += next.numel;  // contiguous in both layouts (the same unit under the same wrap): one read
    } else {
      spans.push_back(next);
    }
  }
  return spans;
}

void copy_unit(const Layout& to, int u, const Layout& from, const std::vector<const float*>& src, float* out) {
  GPT_CHECK((int)src.size() == from.num_units(), "layout: copy_unit got ", src.size(), " units, the layout has ",
            from.num_units());
  for (const UnitSpan& s : to.map_range(u, 0, to.unit(u).numel, from))
    std::copy(src[s.src_unit] + s.src, src[s.src_unit] + s.src + s.numel, out + s.dst);
}

}  // namespace gpt
