// Sharded checkpoints: a run saved at N ranks and resumed continues exactly (same world size: bit-exact);
// a run saved at 4 ranks and resumed at 2 or 3 ranks (resharding) continues the single-process run within
// the parity bound of noise_floor.h (a multiple of the fp32 noise floor measured here); a checkpoint of
// another model is refused with a clear error on every rank.
#include <gtest/gtest.h>

#include <filesystem>

#include "src/core/check.h"
#include "src/dist/comm_world.h"
#include "tests/fsdp/fsdp_run.h"
#include "tests/fsdp/mpi_world.h"
#include "tests/fsdp/noise_floor.h"
#include "src/train/checkpoint.h"
#include "tests/common/tiny_config.h"

namespace gpt::test {
namespace {

RunSpec spec() {
  RunSpec s;
  s.cfg = tiny_config(2, 2, 32, 16, 89);
  s.global_seqs = 12;
  return s;
}

TEST(FsdpCheckpoint, ResumeAtTheSameWorldSizeIsBitExact) {
  Communicator& w = world();
  const std::string dir = shared_dir("same");
  RunSpec s = spec();
  ShardedRun a(s, w);
  for (int i = 0; i < 4; i++) a.train_step();
  TrainProgress p;
  p.step = a.step;
  save_checkpoint(dir, *a.engine, p, 2);
  for (int i = 0; i < 4; i++) a.train_step();

  ShardedRun b(s, w);
  TrainProgress q = load_checkpoint(find_latest_checkpoint(dir), *b.engine);
  EXPECT_EQ(q.step, 4);
  b.step = (int)q.step;
  for (int i = 0; i < 4; i++) b.train_step();
  auto pa = a.params(), pb = b.params();
  for (size_t u = 0; u < pa.size(); u++) EXPECT_EQ(pa[u], pb[u]) << "unit " << u;
}

TEST(FsdpCheckpoint, ReshardFromFourRanksToTwoAndThree) {
  Communicator& w = world();
  if (w.world() != 4) GTEST_SKIP() << "needs 4 ranks";
  const std::string dir = shared_dir("reshard");
  RunSpec s = spec();
  // the single-process run of 10 steps and its noise floor (every rank of the 4, before the split)
  const NoiseFloor f = measure_noise_floor(s, 10, w);
  if (w.rank() == 0) print_floor("model=ckpt", f);
  {
    ShardedRun a(s, w);
    for (int i = 0; i < 5; i++) a.train_step();
    TrainProgress p;
    p.step = a.step;
    save_checkpoint(dir, *a.engine, p, 2);
  }
  const std::string ckpt = find_latest_checkpoint(dir);
  for (int sub_world : {2, 3}) {
    auto sub = w.split(w.rank() < sub_world ? 0 : 1, w.rank());
    if (w.rank() < sub_world) {
      ShardedRun b(s, *sub);
      TrainProgress q = load_checkpoint(ckpt, *b.engine);
      b.step = (int)q.step;
      std::vector<float> losses;
      for (int i = 5; i < 10; i++) {
        losses.push_back(b.train_step());
        EXPECT_LE(rel(losses.back(), f.ref.losses[i]), f.loss_bound(i))
            << sub_world << " ranks, step " << i + 1 << ": loss " << losses.back() << ", one process "
            << f.ref.losses[i] << ", floor " << f.loss[i];
      }
      const ParityMeasure m = measure_parity(f, losses, 5, b.params());
      EXPECT_LE(m.params_diff, f.params_bound()) << sub_world << " ranks: floor " << f.params;
      if (w.rank() == 0) print_parity("model=ckpt case=reshard_4_to_" + std::to_string(sub_world), sub_world, f, m);
    }
    w.barrier();
  }
}

TEST(FsdpCheckpoint, OtherModelIsRefusedOnEveryRank) {
  Communicator& w = world();
  const std::string dir = shared_dir("other");
  RunSpec s = spec();
  {
    ShardedRun a(s, w);
    TrainProgress p;
    save_checkpoint(dir, *a.engine, p, 1);
  }
  RunSpec other = s;
  other.cfg.channels = 16;
  other.cfg.finalize();
  ShardedRun b(other, w);
  try {
    load_checkpoint(find_latest_checkpoint(dir), *b.engine);
    ADD_FAILURE() << "loading another model's checkpoint must fail";
  } catch (const gpt::Error& e) {
    EXPECT_NE(std::string(e.what()).find("ckpt_"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace gpt::test
