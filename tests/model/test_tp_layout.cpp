// The tensor-parallel layout (src/model/layout.h, tp_shape.h): how a group of T ranks splits each tensor.
// Checked against Megatron's split written out here index by index (not through the layout's own runs):
// qkvw's rows of each of q, k and v for the rank's heads, fc's rows, attproj's and fcproj's input columns,
// wte's vocabulary rows; every element of every tensor found by tp_place where tp_runs puts it; slicing a
// whole model and putting the slices back (copy_unit, scatter_unit) giving it back exactly; each unit's
// replicated span holding exactly the tensors the group keeps whole.
#include <gtest/gtest.h>

#include <numeric>

#include "src/model/layout.h"
#include "tests/common/error_of.h"
#include "tests/common/tiny_config.h"

namespace gpt::test {
namespace {

const GPTConfig kCfg = tiny_config(3, 4, 32, 16, 97);  // C = 32, 4 heads of 8, Vp = 128

// Whole units numbered: element i of unit u holds 1000000 u + i (exact in fp32 for these sizes).
std::vector<std::vector<float>> numbered(const Layout& whole) {
  std::vector<std::vector<float>> units;
  for (int u = 0; u < whole.num_units(); u++) {
    units.emplace_back((size_t)whole.unit(u).numel);
    for (size_t i = 0; i < units.back().size(); i++) units.back()[i] = (float)(1000000 * u + (int64_t)i);
  }
  return units;
}

std::vector<std::vector<float>> slices_of(const Layout& local, const Layout& whole,
                                          const std::vector<std::vector<float>>& units) {
  std::vector<const float*> src;
  for (const auto& v : units) src.push_back(v.data());
  std::vector<std::vector<float>> out;
  for (int u = 0; u < local.num_units(); u++) {
    out.emplace_back((size_t)local.unit(u).numel, 0.0f);
    copy_unit(local, u, whole, src, out.back().data());
  }
  return out;
}

// Element (row, col) of the whole tensor `name` of block `layer` in the numbered whole units.
float whole_at(const Layout& whole, const std::vector<std::vector<float>>& units, const char* name, int layer,
               int64_t row, int64_t col) {
  const TensorPlace p = whole.locate(name, layer);
  return units[p.unit][p.spec->offset + row * p.spec->cols + col];
}
float local_at(const Layout& local, const std::vector<std::vector<float>>& slices, const char* name, int layer,
               int64_t row, int64_t col) {
  const TensorPlace p = local.locate(name, layer);
  return slices[p.unit][p.spec->offset + row * p.spec->cols + col];
}

TEST(TpLayout, EachRankHoldsMegatronsSlices) {
  const int64_t C = kCfg.channels, Vp = kCfg.padded_vocab_size;
  const Layout whole(kCfg);
  const auto units = numbered(whole);
  for (int T : {2, 4}) {
    const int64_t Cl = C / T;
    for (int t = 0; t < T; t++) {
      const Layout local(kCfg, {}, TpShape{T, t});
      const auto s = slices_of(local, whole, units);
      for (int l = 0; l < kCfg.num_layers; l++) {
        for (int part = 0; part < 3; part++)  // q, k, v: this rank's heads' rows of each
          for (int64_t j = 0; j < Cl; j++) {
            const int64_t row = part * C + t * Cl + j;
            EXPECT_EQ(local_at(local, s, "qkvw", l, part * Cl + j, 5), whole_at(whole, units, "qkvw", l, row, 5));
            EXPECT_EQ(local_at(local, s, "qkvb", l, 0, part * Cl + j), whole_at(whole, units, "qkvb", l, 0, row));
          }
        for (int64_t i = 0; i < C; i++)  // row-parallel: this rank's input columns
          for (int64_t j = 0; j < Cl; j++) {
            EXPECT_EQ(local_at(local, s, "attprojw", l, i, j), whole_at(whole, units, "attprojw", l, i, t * Cl + j));
            EXPECT_EQ(local_at(local, s, "fcprojw", l, i, 3 * Cl + j),
                      whole_at(whole, units, "fcprojw", l, i, 4 * t * Cl + 3 * Cl + j));
          }
        for (int64_t j = 0; j < 4 * Cl; j++)
          EXPECT_EQ(local_at(local, s, "fcb", l, 0, j), whole_at(whole, units, "fcb", l, 0, t * 4 * Cl + j));
        for (const char* whole_tensor : {"ln1w", "attprojb", "ln2b", "fcprojb"})
          for (int64_t c = 0; c < C; c++)
            EXPECT_EQ(local_at(local, s, whole_tensor, l, 0, c), whole_at(whole, units, whole_tensor, l, 0, c));
      }
      for (int64_t v = 0; v < Vp / T; v++)
        EXPECT_EQ(local_at(local, s, "wte", -1, v, 7), whole_at(whole, units, "wte", -1, t * (Vp / T) + v, 7));
      EXPECT_EQ(local.vocab_lo(), t * (Vp / T));
      EXPECT_EQ(local.vocab_rows(), Vp / T);
    }
  }
}

TEST(TpLayout, PlaceAndRunsAgreeOnEveryElement) {
  for (int T : {2, 4}) {
    for (const WrapPolicy& wrap : {WrapPolicy{}, WrapPolicy::parse("blocks:2")}) {
      std::vector<Layout> ranks;
      for (int t = 0; t < T; t++) ranks.emplace_back(kCfg, wrap, TpShape{T, t});
      for (int u = 0; u < ranks[0].num_units(); u++)
        for (size_t k = 0; k < ranks[0].unit(u).tensors.size(); k++) {
          const TensorSpec& spec0 = ranks[0].unit(u).tensors[k];
          const int64_t full_numel = spec0.split == TpSplit::none ? spec0.numel : spec0.numel * T;
          std::vector<int> seen((size_t)full_numel, 0);
          for (int t = 0; t < T; t++) {
            const TensorSpec& spec = ranks[t].unit(u).tensors[k];
            for (const TpRun& run : tp_runs(spec, TpShape{T, t}))
              for (int64_t i = 0; i < run.numel; i++) {
                const TpPlace p = tp_place(spec, T, run.full + i);
                ASSERT_GE(p.numel, 1);
                if (spec.split != TpSplit::none) {
                  EXPECT_EQ(p.rank, t) << spec.name;
                  EXPECT_EQ(p.local, run.local + i) << spec.name;
                }
                seen[(size_t)(run.full + i)]++;
              }
          }
          for (size_t i = 0; i < seen.size(); i++)
            ASSERT_EQ(seen[i], spec0.split == TpSplit::none ? T : 1) << spec0.name << " element " << i;
        }
    }
  }
}

TEST(TpLayout, SlicesPutBackGiveTheWholeModel) {
  const WrapPolicy wrap = WrapPolicy::parse("blocks:2");
  const Layout whole(kCfg, wrap);
  const auto units = numbered(whole);
  for (int T : {2, 4}) {
    std::vector<std::vector<float>> back;
    std::vector<float*> dst;
    for (int u = 0; u < whole.num_units(); u++) back.emplace_back((size_t)whole.unit(u).numel, -1.0f);
    for (auto& v : back) dst.push_back(v.data());
    for (int t = 0; t < T; t++) {
      const Layout local(kCfg, wrap, TpShape{T, t});
      const auto s = slices_of(local, whole, units);
      for (int u = 0; u < local.num_units(); u++) scatter_unit(local, u, s[u].data(), whole, dst);
    }
    EXPECT_EQ(back, units) << "T=" << T;
  }
}

TEST(TpLayout, ReplicatedSpanHoldsTheWholeTensorsOnly) {
  for (int T : {1, 2, 4}) {
    const Layout local(kCfg, WrapPolicy::parse("blocks:2"), TpShape{T, T - 1});
    int64_t split = 0;
    for (int u = 0; u < local.num_units(); u++) {
      const Layout::Span s = local.replicated_span(u);
      for (const TensorSpec& t : local.unit(u).tensors) {
        const bool inside = t.offset >= s.first && t.offset + t.numel <= s.first + s.numel;
        EXPECT_EQ(inside, T > 1 && t.split == TpSplit::none) << t.name << " T=" << T;
        split += t.split != TpSplit::none ? t.numel : 0;
      }
    }
    // the split tensors' slices add up to 1/T of the whole model's
    int64_t whole_split = 0;
    for (int u = 0; u < Layout(kCfg).num_units(); u++)
      for (const TensorSpec& t : Layout(kCfg).unit(u).tensors) whole_split += t.split != TpSplit::none ? t.numel : 0;
    EXPECT_EQ(split * T, whole_split) << "T=" << T;
  }
}

TEST(TpLayout, AGroupTheModelCannotBeSplitOverIsAOneLineError) {
  EXPECT_NE(error_of([] { Layout(kCfg, {}, TpShape{3, 0}); }).find("--tp 3 must divide the model's 4 heads"),
            std::string::npos);
  const GPTConfig six = tiny_config(2, 6, 48, 16, 97);  // Vp = 128
  EXPECT_NE(error_of([&] { Layout(six, {}, TpShape{3, 0}); }).find("--tp 3 must divide the padded vocabulary 128"),
            std::string::npos);
}

}  // namespace
}  // namespace gpt::test
