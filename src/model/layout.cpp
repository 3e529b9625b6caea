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
int64_t add(UnitSpec& u, const std::string& name, int64_t rows, int64_t cols, bool decay, int layer,
            TpSplit split = TpSplit::none, int parts = 1) {
  TensorSpec t;
  t.name = name;
  t.offset = u.numel;
  t.rows = rows;
  t.cols = cols;
  t.numel = rows * cols;
  t.weight_decay = decay;
  t.layer = layer;
  t.split = split;
  t.parts = parts;
  u.tensors.push_back(t);
  u.numel += t.numel;
  return t.offset;
}

void add_lnf(UnitSpec& u, int64_t C) {
  add(u, "lnfw", 1, C, false, -1);
  add(u, "lnfb", 1, C, false, -1);
}

// A block's tensors in the model file's order, with their full shapes (in units of C; rows 0: a vector, one
// row) and how a tensor-parallel group splits them (tp_shape.h). This is Megatron's split of a block: each
// branch (attention, MLP) opens with a column-parallel product, split by its output rows (qkv: whole heads of
// q, k and v on each rank, hence 3 parts; fc) and closes with a row-parallel one, split by its input columns
// (attproj, fcproj), so that a branch needs one reduction, of its output; the layernorms and the row-parallel
// products' biases (added once, after that reduction) are whole on every rank.
struct BlockTensor {
  const char* name;
  int rows, cols;  // the full shape: rows * C (0: one row) by cols * C
  bool decay;
  TpSplit split;
  int parts;
  int64_t BlockOffsets::*offset;
};
constexpr BlockTensor kBlock[] = {
    {"ln1w", 0, 1, false, TpSplit::none, 1, &BlockOffsets::ln1w},
    {"ln1b", 0, 1, false, TpSplit::none, 1, &BlockOffsets::ln1b},
    {"qkvw", 3, 1, true, TpSplit::rows, 3, &BlockOffsets::qkvw},
    {"qkvb", 0, 3, false, TpSplit::rows, 3, &BlockOffsets::qkvb},
    {"attprojw", 1, 1, true, TpSplit::cols, 1, &BlockOffsets::attprojw},
    {"attprojb", 0, 1, false, TpSplit::none, 1, &BlockOffsets::attprojb},
    {"ln2w", 0, 1, false, TpSplit::none, 1, &BlockOffsets::ln2w},
    {"ln2b", 0, 1, false, TpSplit::none, 1, &BlockOffsets::ln2b},
    {"fcw", 4, 1, true, TpSplit::rows, 1, &BlockOffsets::fcw},
    {"fcb", 0, 4, false, TpSplit::rows, 1, &BlockOffsets::fcb},
    {"fcprojw", 1, 4, true, TpSplit::cols, 1, &BlockOffsets::fcprojw},
    {"fcprojb", 0, 1, false, TpSplit::none, 1, &BlockOffsets::fcprojb},
};

constexpr int kBlockTensors = (int)(sizeof kBlock / sizeof kBlock[0]);

// The place of tensor `name` in a block (kBlock), -1 when no block tensor has that name.
int block_tensor(const std::string& name) {
  for (int k = 0; k < kBlockTensors; k++)
    if (name == kBlock[k].name) return k;
  return -1;
}

// Appends block l's tensors to u with this rank's shapes (a rank of T), in the file's order; with `which`, only
// the tensors the group splits (TpSplit other than none) or only the whole ones. Writes their offsets into o,
// and with `at` (block l's kBlockTensors entries of Layout's index) each one's (unit, tensor) there.
enum class Which { all, split, whole };
void add_block(UnitSpec& u, int l, int64_t C, int T, Which which, BlockOffsets& o, int unit = -1,
               std::pair<int, int>* at = nullptr) {
  for (int k = 0; k < kBlockTensors; k++) {
    const BlockTensor& b = kBlock[k];
    const bool split = b.split != TpSplit::none;
    if ((which == Which::split && !split) || (which == Which::whole && split)) continue;
    int64_t rows = b.rows ? b.rows * C : 1, cols = b.cols * C;
    if (b.split == TpSplit::rows) (b.rows ? rows : cols) /= T;  // a split vector splits its elements
    if (b.split == TpSplit::cols) cols /= T;
    if (at) at[k] = {unit, (int)u.tensors.size()};
    o.*b.offset = add(u, b.name, rows, cols, b.decay, l, b.split, b.parts);
  }
}
}  // namespace

void check_tp_shape(const GPTConfig& cfg, TpShape tp) {
  GPT_CHECK(tp.size >= 1 && tp.rank >= 0 && tp.rank < tp.size, "layout: tensor-parallel rank ", tp.rank,
            " outside a group of ", tp.size);
  GPT_CHECK(cfg.num_heads % tp.size == 0, "--tp ", tp.size, " must divide the model's ", cfg.num_heads,
            " heads (--n-head): each rank computes whole heads");
  GPT_CHECK(cfg.padded_vocab_size % tp.size == 0, "--tp ", tp.size, " must divide the padded vocabulary ",
            cfg.padded_vocab_size, ": each rank holds an equal slice of wte's rows");
}

Layout::Layout(const GPTConfig& cfg, const WrapPolicy& wrap, TpShape tp) : Layout(cfg, wrap, tp, false) {}

Layout Layout::legacy(const GPTConfig& cfg) { return Layout(cfg, WrapPolicy{}, TpShape{}, true); }

Layout::Layout(const GPTConfig& cfg, const WrapPolicy& wrap, TpShape tp, bool legacy_head)
    : cfg_(cfg), wrap_(wrap), tp_(tp) {
  const int64_t C = cfg.channels, Vp = cfg.padded_vocab_size, maxT = cfg.max_seq_len;
  const int L = cfg.num_layers, T = tp.size;
  GPT_CHECK(Vp > 0, "layout: config not finalized");
  check_tp_shape(cfg, tp);
  UnitSpec embed;
  embed.name = "embed";
  add(embed, "wte", Vp / T, C, true, -1, TpSplit::rows);  // the vocabulary rows [vocab_lo, +vocab_rows)
  add(embed, "wpe", maxT, C, true, -1);
  if (!legacy_head) add_lnf(embed, C);
  const int64_t wte_numel = (Vp / T) * C;
  replicated_.push_back(T > 1 ? Span{wte_numel, embed.numel - wte_numel} : Span{});
  units_.push_back(std::move(embed));

  UnitSpec one;  // one block's tensors on this rank, for their count
  BlockOffsets scratch{};
  add_block(one, 0, C, T, Which::all, scratch);
  block_numel_ = one.numel;
  block_index_.assign((size_t)L * kBlockTensors, {-1, -1});
  int l = 0;
  for (int n : wrap.groups(L, block_numel_)) {
    const int unit = (int)units_.size();
    UnitSpec b;
    b.first_layer = l;
    b.last_layer = l + n - 1;
    b.name = n == 1 ? "block" + std::to_string(l) : "blocks" + std::to_string(l) + "-" + std::to_string(l + n - 1);
    b.tensors.reserve((size_t)n * kBlockTensors);
    for (; l <= b.last_layer; l++) {  // T = 1: each block whole, in turn; T > 1: the split tensors first
      layer_unit_.push_back((int)units_.size());
      layer_offset_.push_back(b.numel);
      block_at_.emplace_back();
      add_block(b, l, C, T, T == 1 ? Which::all : Which::split, block_at_.back(), unit, &block_index_[(size_t)l * kBlockTensors]);
    }
    const int64_t split_end = b.numel;
    if (T > 1)  // then every block's whole tensors: the unit's replicated span
      for (int k = b.first_layer; k <= b.last_layer; k++)
        add_block(b, k, C, T, Which::whole, block_at_[k], unit, &block_index_[(size_t)k * kBlockTensors]);
    replicated_.push_back(T > 1 ? Span{split_end, b.numel - split_end} : Span{});
    units_.push_back(std::move(b));
  }
  if (legacy_head) {
    UnitSpec head;
    head.name = "head";
    add_lnf(head, C);
    units_.push_back(head);
    replicated_.push_back(Span{});
  }
  for (int u = 0; u < num_units(); u++) {
    order_[(int)Pass::forward].push_back(u);
    for (int t = 0; t < (int)units_[u].tensors.size(); t++)
      if (units_[u].tensors[t].layer < 0) other_index_.push_back({u, t});
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
  std::pair<int, int> at{-1, -1};
  if (layer >= 0 && layer < cfg_.num_layers) {
    const int k = block_tensor(name);
    if (k >= 0) at = block_index_[(size_t)layer * kBlockTensors + k];
  } else if (layer == -1) {
    for (const auto& [u, t] : other_index_)
      if (units_[u].tensors[t].name == name) at = {u, t};
  }
  GPT_CHECK(at.first >= 0, "layout: no tensor ", name, layer >= 0 ? str(" in block ", layer) : std::string());
  return {at.first, &units_[at.first].tensors[at.second]};
}

std::vector<UnitSpan> Layout::map_range(int u, int64_t lo, int64_t hi, const Layout& src) const {
  GPT_CHECK(src.cfg_ == cfg_, "layout: map_range between layouts of two models");
  GPT_CHECK(src.tp_ == tp_, "layout: map_range between layouts of two tensor-parallel shapes");
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

std::vector<TpRun> tp_runs(const TensorSpec& t, TpShape tp) {
  const int T = tp.size, r = tp.rank;
  if (t.split == TpSplit::none || T == 1) return {TpRun{0, 0, t.numel}};
  std::vector<TpRun> runs;
  if (t.split == TpSplit::cols) {  // every row: this rank's columns [r cols, (r+1) cols) of rows of T cols
    for (int64_t i = 0; i < t.rows; i++) runs.push_back({i * t.cols, (i * T + r) * t.cols, t.cols});
    return runs;
  }
  // rows: each of the `parts` row blocks split apart; a vector (one row) splits its elements the same way
  const int64_t row = t.rows == 1 ? 1 : t.cols;                  // elements per split row
  const int64_t per_part = (t.rows == 1 ? t.cols : t.rows) / t.parts;  // this rank's rows of a part
  for (int p = 0; p < t.parts; p++)
    runs.push_back({p * per_part * row, (p * T + r) * per_part * row, per_part * row});
  return runs;
}

TpPlace tp_place(const TensorSpec& t, int T, int64_t f) {
  if (t.split == TpSplit::none || T == 1) return {0, f, t.numel * (t.split == TpSplit::none ? 1 : T) - f};
  if (t.split == TpSplit::cols) {
    const int64_t full_cols = t.cols * T, row = f / full_cols, c = f % full_cols;
    return {(int)(c / t.cols), row * t.cols + c % t.cols, t.cols - c % t.cols};
  }
  const int64_t row = t.rows == 1 ? 1 : t.cols;                       // elements per split row
  const int64_t per_part = (t.rows == 1 ? t.cols : t.rows) / t.parts;  // a rank's rows of a part
  const int64_t r = f / row, within = f % row;                         // the full tensor's row, and column
  const int64_t part = r / (per_part * T), q = r % (per_part * T);
  const int64_t local_row = part * per_part + q % per_part;
  return {(int)(q / per_part), local_row * row + within, (per_part - q % per_part) * row - within};
}

void scatter_unit(const Layout& from, int u, const float* src, const Layout& to, const std::vector<float*>& dst) {
  GPT_CHECK(to.tp().size == 1 && to.config() == from.config(), "layout: scatter_unit into a layout with tensor "
            "parallelism, or of another model");
  for (const TensorSpec& t : from.unit(u).tensors) {
    const TensorPlace p = to.locate(t.name, t.layer);
    for (const TpRun& run : tp_runs(t, from.tp()))
      std::copy(src + t.offset + run.local, src + t.offset + run.local + run.numel,
                dst[p.unit] + p.spec->offset + run.full);
  }
}

void copy_unit(const Layout& to, int u, const Layout& from, const std::vector<const float*>& src, float* out) {
  GPT_CHECK((int)src.size() == from.num_units(), "layout: copy_unit got ", src.size(), " units, the layout has ",
            from.num_units());
  GPT_CHECK(from.tp().size == 1, "layout: copy_unit from a tensor-parallel rank's layout");
  if (to.tp().size > 1) {  // this rank's slice of each tensor, run by run
    for (const TensorSpec& t : to.unit(u).tensors) {
      const TensorPlace p = from.locate(t.name, t.layer);
      for (const TpRun& run : tp_runs(t, to.tp())) {
        const float* in = src[p.unit] + p.spec->offset + run.full;
        std::copy(in, in + run.numel, out + t.offset + run.local);
      }
    }
    return;
  }
  for (const UnitSpan& s : to.map_range(u, 0, to.unit(u).numel, from))
    std::copy(src[s.src_unit] + s.src, src[s.src_unit] + s.src + s.numel, out + s.dst);
}

}  // namespace gpt
