// Tensor parallelism on CPU ranks: T ranks of a tensor-parallel group (and DP groups of them) train what one
// process trains. d4 on Tiny Shakespeare's bytes, 20 steps of the same global batch (24 sequences, 2
// micro-steps) from the same seed: losses within 1e-5 relative of the one-process run at every step (the
// issue's figure), and within the noise floor's parity bound (noise_floor.h) on losses and final parameters.
// Why the floor's bound holds here: the group changes only the association of sums, never their roundings'
// count: a row-parallel product's K-sum as T partial sums added over the group, the loss's sum of
// exponentials over vocabulary slices, a replicated tensor's gradient summed over the rows of each rank's
// share then over the group (sequence parallelism), the norm in another order; the lookups of the
// vocab-parallel embedding add one nonzero to zeros (exact). Other associations are what the floor samples
// (gradient accumulation and norm splits of one process); the data-parallel part adds the engine's division
// as in test_fsdp_parity.cpp. So the same bound, derived there, applies.
// The rate is the trainer's default, 6e-4: at the fixtures' usual 2e-3 this model on real text is so sensitive
// that one process alone, summing in another order, moves its loss by 5e-4 to 5e-3 within 20 steps (the floor
// measured so), past the 1e-5 any implementation could then meet; at 6e-4 that floor is 1e-6 to 4e-6.
// The cases: T = 2 (2 ranks) with and without sequence parallelism, recompute full, selective and every:2,
// offload of parameters, optimizer and activations, wraps of 2 and 3 blocks (a unit's replicated span holding
// several blocks' whole tensors) and --no-sync (accumulators that hold earlier micro-steps' gradients); at 4
// ranks T = 2 x DP = 2 under every strategy and with --no-sync, and T = 4.
// Also: a run repeats itself bit for bit; the tensors every rank of a group holds whole stay the same on
// every rank; and the GPT-2 vocabulary (V = 50257, T = 2 and 4) over fewer steps.
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <iterator>
#include <map>

#include "tests/common/test_paths.h"
#include "tests/common/tiny_config.h"
#include "tests/fsdp/fsdp_run.h"
#include "tests/fsdp/mpi_world.h"
#include "tests/fsdp/noise_floor.h"

namespace gpt::test {
namespace {

constexpr int kSteps = 20;
constexpr double kLossRel = 1e-5;  // the figure for losses against one process

// Tiny Shakespeare as byte tokens (the byte tokenizer's ids are the bytes).
const std::vector<int>& shakespeare_bytes() {
  static const std::vector<int> bytes = [] {
    std::ifstream f(source_dir() + "/data/tinyshakespeare/input.txt", std::ios::binary);
    std::vector<int> out;
    for (std::istreambuf_iterator<char> it(f), end; it != end; ++it) out.push_back((unsigned char)*it);
    return out;
  }();
  return bytes;
}

RunSpec d4_spec(int vocab = 257) {
  RunSpec s;
  s.cfg = tiny_config(4, 4, 256, 16, vocab);  // d4's shape; byte vocabulary (Vp 384) unless told
  s.T = 16;
  s.global_seqs = 24;
  s.corpus = &shakespeare_bytes();
  s.seed = 7;
  s.lr = 6e-4f;  // the trainer's default peak rate (see the top)
  return s;
}

struct Case {
  int tp;
  bool sp;
  ShardStrategy st = ShardStrategy::full;
  const char* recompute = "none";
  const char* offload = "none";  // optimizer, params, activations, or params,activations
  const char* wrap = "block";
  bool no_sync = false;
  std::string label() const {
    return "tp" + std::to_string(tp) + (sp ? "_sp" : "_nosp") + "_" + FsdpOptions::name(st) + "_rc" +
           std::string(recompute) + "_off" + std::string(offload) + "_wrap" + wrap + (no_sync ? "_nosync" : "");
  }
};

RunSpec case_spec(const Case& c, const RunSpec& base) {
  RunSpec s = base;
  s.tp.size = c.tp;
  s.tp.sequence_parallel = c.sp;
  s.accum = 2;
  s.fsdp.strategy = c.st;
  if (c.st == ShardStrategy::hybrid) s.fsdp.shard_group = 1;  // DP = 2 here: groups of 1, replicas across them
  s.recompute = RecomputePolicy::parse(c.recompute);
  const std::string off = c.offload;
  s.fsdp.offload = off.find("params") != std::string::npos      ? OffloadMode::params
                   : off.find("optimizer") != std::string::npos ? OffloadMode::optimizer
                                                                : OffloadMode::none;
  s.offload_activations = off.find("activations") != std::string::npos;
  s.wrap = WrapPolicy::parse(c.wrap);
  s.fsdp.no_sync = c.no_sync;
  return s;
}

// The floor of a shape, measured once (every rank reaches a shape's first case together).
const NoiseFloor& floor_of(const std::string& name, const RunSpec& spec, int steps) {
  static std::map<std::string, NoiseFloor> floors;
  auto it = floors.find(name);
  if (it == floors.end()) {
    it = floors.emplace(name, measure_noise_floor(spec, steps, world())).first;
    if (world().rank() == 0) print_floor("tp model=" + name, it->second);
  }
  return it->second;
}

// Every rank of each tensor-parallel group holds the same whole tensors (the replicated spans), bit for bit.
void expect_replicated_in_step(ShardedRun& run, const std::string& label) {
  const Layout& l = run.model->layout();
  for (int u = 0; u < l.num_units(); u++) {
    std::vector<float> mine = run.engine->gather_unit_to_host(u);
    const Layout::Span s = l.replicated_span(u);
    std::vector<float> first(mine.begin() + s.first, mine.begin() + s.first + s.numel);
    run.tp->group().broadcast(first.data(), first.size() * sizeof(float), 0);
    EXPECT_EQ(std::memcmp(first.data(), mine.data() + s.first, first.size() * sizeof(float)), 0)
        << label << ": unit " << l.unit(u).name << "'s replicated tensors differ from the group's rank 0";
  }
}

void expect_tp_parity(const std::string& name, const RunSpec& base, const Case& c, int steps) {
  Communicator& w = world();
  const NoiseFloor& f = floor_of(name, base, steps);
  ShardedRun run(case_spec(c, base), w);
  std::vector<float> losses;
  for (int s = 0; s < steps; s++) {
    losses.push_back(run.train_step());
    EXPECT_LE(rel(losses[s], f.ref.losses[s]), kLossRel)
        << c.label() << " step " << s + 1 << ": loss " << losses[s] << ", one process " << f.ref.losses[s];
    EXPECT_LE(rel(losses[s], f.ref.losses[s]), f.loss_bound(s)) << c.label() << " step " << s + 1;
  }
  expect_replicated_in_step(run, c.label());
  const ParityMeasure m = measure_parity(f, losses, 0, run.params());
  EXPECT_LE(m.params_diff, f.params_bound()) << c.label() << ": floor " << f.params;
  if (w.rank() == 0) print_parity("tp model=" + name + " case=" + c.label(), w.world(), f, m);
}

// The cases a world of N ranks can run: T in {2, 4} dividing N (d4 has 4 heads).
std::vector<Case> cases_for(int N) {
  std::vector<Case> out;
  if (N == 2) {
    out = {{2, true}, {2, false}, {2, true, ShardStrategy::full, "full"}, {2, false, ShardStrategy::full, "selective"},
           {2, true, ShardStrategy::full, "none", "params,activations"}, {2, false, ShardStrategy::full, "every:2", "activations"},
           {2, true, ShardStrategy::full, "none", "optimizer", "blocks:2"}, {2, true, ShardStrategy::full, "full", "none", "blocks:3", true}};
  } else if (N == 4) {
    for (ShardStrategy st : {ShardStrategy::full, ShardStrategy::grad_op, ShardStrategy::none, ShardStrategy::hybrid})
      out.push_back({2, true, st});
    out.push_back({2, false, ShardStrategy::grad_op, "full", "params"});
    out.push_back({2, true, ShardStrategy::full, "none", "none", "blocks:2", true});  // --no-sync over DP = 2
    out.push_back({4, true});
    out.push_back({4, false, ShardStrategy::full, "full", "activations"});
  }
  return out;
}

TEST(TpParity, D4ShakespeareTwentySteps) {
  const std::vector<Case> cases = cases_for(world().world());
  if (cases.empty()) GTEST_SKIP() << "tensor parallelism of d4 (4 heads) needs 2 or 4 ranks";
  for (const Case& c : cases) expect_tp_parity("d4", d4_spec(), c, kSteps);
}

TEST(TpParity, Gpt2VocabularyFewSteps) {
  const int N = world().world();
  if (N != 2 && N != 4) GTEST_SKIP() << "needs 2 or 4 ranks";
  RunSpec base = d4_spec(50257);  // Vp = 50304: 25152 rows per rank at T = 2, 12576 at T = 4
  base.cfg = tiny_config(2, 4, 64, 16, 50257);
  base.corpus = nullptr;  // ids over the whole vocabulary, every slice's included
  expect_tp_parity("gpt2vocab", base, Case{N, true}, 6);
}

TEST(TpParity, ARunRepeatsItselfBitForBit) {
  const int N = world().world();
  if (N != 2 && N != 4) GTEST_SKIP() << "needs 2 or 4 ranks";
  const RunSpec s = case_spec(Case{2, true, N == 4 ? ShardStrategy::full : ShardStrategy::full, "full"}, d4_spec());
  std::vector<std::vector<float>> params[2];
  std::vector<float> losses[2];
  for (int k = 0; k < 2; k++) {
    ShardedRun run(s, world());
    for (int i = 0; i < 5; i++) losses[k].push_back(run.train_step());
    params[k] = run.params();
  }
  EXPECT_EQ(std::memcmp(losses[0].data(), losses[1].data(), losses[0].size() * sizeof(float)), 0);
  for (size_t u = 0; u < params[0].size(); u++)
    EXPECT_EQ(std::memcmp(params[0][u].data(), params[1][u].data(), params[0][u].size() * sizeof(float)), 0) << u;
}

}  // namespace
}  // namespace gpt::test
