// Wrap policies and the layouts they make: the flag's forms and its errors, the unit groups of each form
// against the rule worked by hand, the final layernorm in the root unit, the legacy layout of old checkpoint
// files, and the tensor map between layouts (every element of one layout found exactly once in another, at
// the same tensor and index), which checkpoints and model files rely on to cross wraps. Initial values do
// not depend on the wrap.
#include <gtest/gtest.h>

#include <set>
#include <vector>

#include "src/core/check.h"
#include "src/model/gpt.h"
#include "src/model/layout.h"
#include "tests/common/tiny_config.h"

namespace gpt::test {
namespace {

TEST(Wrap, ParsesEveryFormAndRefusesTheRestNamingTheFlag) {
  EXPECT_EQ(WrapPolicy::parse("block"), WrapPolicy{});
  EXPECT_EQ(WrapPolicy::parse("blocks:4").n, 4);
  EXPECT_EQ(WrapPolicy::parse("blocks:4").kind, WrapPolicy::Kind::blocks);
  EXPECT_EQ(WrapPolicy::parse("min-params:100M").n, 100000000);
  EXPECT_EQ(WrapPolicy::parse("min-params:3k").n, 3000);
  EXPECT_EQ(WrapPolicy::parse("min-params:2B").n, 2000000000);
  for (const char* s : {"block", "blocks:3", "min-params:12345"}) EXPECT_EQ(WrapPolicy::parse(s).str(), s);
  for (const char* bad : {"", "blocks", "blocks:", "blocks:0", "blocks:-2", "blocks:2x", "min-params:0", "min-params:1G",
                          "min-params:k", "units:2", "Block", "min-params:99999999999999999999"}) {
    try {
      WrapPolicy::parse(bad);
      ADD_FAILURE() << "accepted '" << bad << "'";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("--wrap"), std::string::npos) << e.what();
      EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos) << e.what();
    }
  }
}

TEST(Wrap, GroupsFollowTheRuleWorkedByHand) {
  using V = std::vector<int>;
  EXPECT_EQ(WrapPolicy::parse("block").groups(5, 100), V({1, 1, 1, 1, 1}));
  EXPECT_EQ(WrapPolicy::parse("blocks:2").groups(5, 100), V({2, 2, 1}));
  EXPECT_EQ(WrapPolicy::parse("blocks:5").groups(5, 100), V({5}));
  EXPECT_EQ(WrapPolicy::parse("blocks:9").groups(5, 100), V({5}));
  // fairscale's rule: a unit closes once it holds at least N parameters
  EXPECT_EQ(WrapPolicy::parse("min-params:100").groups(5, 100), V({1, 1, 1, 1, 1}));
  EXPECT_EQ(WrapPolicy::parse("min-params:101").groups(5, 100), V({2, 2, 1}));
  EXPECT_EQ(WrapPolicy::parse("min-params:300").groups(5, 100), V({3, 2}));
  EXPECT_EQ(WrapPolicy::parse("min-params:1").groups(3, 100), V({1, 1, 1}));
  EXPECT_EQ(WrapPolicy::parse("min-params:1B").groups(3, 100), V({3}));
}

TEST(Wrap, LayoutGroupsBlocksAndPutsTheFinalLayernormInTheRoot) {
  const GPTConfig c = tiny_config(5, 2, 32, 16, 61);
  const int64_t C = 32, block = 12 * C * C + 13 * C;
  const Layout one(c), two(c, WrapPolicy::parse("blocks:2"));
  EXPECT_EQ(one.block_numel(), block);
  ASSERT_EQ(one.num_units(), 6);
  ASSERT_EQ(two.num_units(), 4);
  EXPECT_EQ(two.unit(1).name, "blocks0-1");
  EXPECT_EQ(two.unit(3).name, "block4");
  EXPECT_EQ(two.unit(2).numel, 2 * block);
  EXPECT_EQ(two.unit(3).numel, block);
  for (const Layout* l : {&one, &two}) {
    EXPECT_EQ(l->unit(0).numel, (int64_t)c.padded_vocab_size * C + (int64_t)c.max_seq_len * C + 2 * C);
    EXPECT_EQ(l->unit(0).tensor("lnfw").offset, l->lnf_offset());
    EXPECT_EQ(l->unit(0).tensor("lnfb").offset, l->lnf_offset() + C);
    EXPECT_EQ(l->total_numel(), c.num_params());
  }
  EXPECT_EQ(two.layer_unit(3), 2);
  EXPECT_EQ(two.layer_offset(3), block);
  EXPECT_TRUE(two.opens_unit(2) && !two.closes_unit(2) && two.closes_unit(3) && two.opens_unit(4) && two.closes_unit(4));
  EXPECT_EQ(two.pass_order(Pass::forward), std::vector<int>({0, 1, 2, 3}));
  EXPECT_EQ(two.pass_order(Pass::backward), std::vector<int>({0, 3, 2, 1}));
  const Layout old = Layout::legacy(c);
  ASSERT_EQ(old.num_units(), 7);
  EXPECT_EQ(old.unit(6).name, "head");
  EXPECT_EQ(old.unit(6).numel, 2 * C);
  EXPECT_EQ(old.unit(0).numel + old.unit(6).numel, one.unit(0).numel);
}

// Every element of every unit of `to` is found once, in the same tensor of `from`, at the same index.
void expect_bijective_map(const Layout& to, const Layout& from) {
  std::set<std::pair<int, int64_t>> seen;  // (source unit, element)
  int64_t mapped = 0;
  for (int u = 0; u < to.num_units(); u++) {
    int64_t next = 0;
    for (const UnitSpan& s : to.map_range(u, 0, to.unit(u).numel, from)) {
      EXPECT_EQ(s.dst, next) << "unit " << u;
      next = s.dst + s.numel;
      mapped += s.numel;
      for (int64_t i = 0; i < s.numel; i += 97) EXPECT_TRUE(seen.insert({s.src_unit, s.src + i}).second);
    }
    EXPECT_EQ(next, to.unit(u).numel);
  }
  EXPECT_EQ(mapped, from.total_numel());
}

TEST(Wrap, TensorMapBetweenLayoutsIsOneToOneAndCopyUnitRoundTrips) {
  const GPTConfig c = tiny_config(5, 2, 32, 16, 61);
  const std::vector<Layout> layouts = {Layout(c), Layout(c, WrapPolicy::parse("blocks:2")),
                                       Layout(c, WrapPolicy::parse("blocks:5")), Layout::legacy(c)};
  // Values that name their tensor and index, so a misplaced element shows.
  const Layout& def = layouts[0];
  std::vector<std::vector<float>> src;
  std::vector<const float*> ptrs;
  for (int u = 0; u < def.num_units(); u++) {
    src.emplace_back((size_t)def.unit(u).numel);
    for (int64_t i = 0; i < def.unit(u).numel; i++) src[u][i] = (float)(u * 1000003 + i);
    ptrs.push_back(src.back().data());
  }
  for (const Layout& to : layouts) {
    expect_bijective_map(to, def);
    expect_bijective_map(def, to);
    std::vector<std::vector<float>> mid;
    std::vector<const float*> mid_ptrs;
    for (int u = 0; u < to.num_units(); u++) {
      mid.emplace_back((size_t)to.unit(u).numel, 0.0f);
      copy_unit(to, u, def, ptrs, mid.back().data());
    }
    for (const std::vector<float>& m : mid) mid_ptrs.push_back(m.data());
    for (int u = 0; u < def.num_units(); u++) {
      std::vector<float> back((size_t)def.unit(u).numel, 0.0f);
      copy_unit(def, u, to, mid_ptrs, back.data());
      EXPECT_EQ(back, src[u]) << "unit " << u;
    }
    // the same tensor at the same index: block 3's qkvw element 7 and lnfb element 1
    const TensorPlace a = to.locate("qkvw", 3), b = def.locate("qkvw", 3);
    EXPECT_EQ(mid[a.unit][a.spec->offset + 7], src[b.unit][b.spec->offset + 7]);
    const TensorPlace f = to.locate("lnfb", -1), g = def.locate("lnfb", -1);
    EXPECT_EQ(mid[f.unit][f.spec->offset + 1], src[g.unit][g.spec->offset + 1]);
  }
}

TEST(Wrap, InitialValuesDoNotDependOnTheWrap) {
  const GPTConfig c = tiny_config(4, 2, 32, 16, 61);
  const Layout def(c), wide(c, WrapPolicy::parse("blocks:3"));
  for (int l = 0; l < c.num_layers; l++) {
    std::vector<float> a((size_t)def.unit(def.layer_unit(l)).numel), b((size_t)wide.unit(wide.layer_unit(l)).numel);
    GPT::init_unit(def, def.layer_unit(l), 7, a.data());
    GPT::init_unit(wide, wide.layer_unit(l), 7, b.data());
    const int64_t n = def.block_numel(), at = wide.layer_offset(l);
    EXPECT_EQ(std::vector<float>(a.begin(), a.begin() + n), std::vector<float>(b.begin() + at, b.begin() + at + n))
        << "block " << l;
  }
}

}  // namespace
}  // namespace gpt::test
