// Sharded checkpoints: a run saved at N ranks and resumed continues exactly (same world size: bit-exact);
// a run saved at 4 ranks and resumed at 2 or 3 ranks (resharding) continues the single-process run to
// 1e-5; a checkpoint of another model is refused with a clear error on every rank.
#include <gtest/gtest.h>

#include <filesystem>

#include "src/core/check.h"
#include "src/dist/comm_world.h"
#include "tests/fsdp/fsdp_run.h"
#include "tests/fsdp/mpi_world.h"
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

// A directory every rank of the job agrees on (rank 0 creates it fresh).
std::string shared_dir(const std::string& name) {
  Communicator& w = world();
  std::string dir = (std::filesystem::temp_directory_path() / ("gpt_fsdp_" + name + "_np" + std::to_string(w.world()))).string();
  if (w.rank() == 0) {
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir);
  }
  w.barrier();
  return dir;
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
  auto single = make_single_communicator();
  ShardedRun ref(s, *single);
  std::vector<float> ref_losses;
  for (int i = 0; i < 10; i++) ref_losses.push_back(ref.train_step());
  {
    ShardedRun a(s, w);
    for (int i = 0; i < 5; i++) a.train_step();
    TrainProgress p;
    p.step = a.step;
    save_checkpoint(dir, *a.engine, p, 2);
  }
  const std::string ckpt = find_latest_checkpoint(dir);
  auto ref_params = ref.params();
  for (int sub_world : {2, 3}) {
    auto sub = w.split(w.rank() < sub_world ? 0 : 1, w.rank());
    if (w.rank() < sub_world) {
      ShardedRun b(s, *sub);
      TrainProgress q = load_checkpoint(ckpt, *b.engine);
      b.step = (int)q.step;
      for (int i = 5; i < 10; i++) {
        float loss = b.train_step();
        EXPECT_NEAR(loss, ref_losses[i], 1e-5 * ref_losses[i]) << sub_world << " ranks, step " << i + 1;
      }
      auto pb = b.params();
      for (size_t u = 0; u < pb.size(); u++) {
        double d = 0, n = 0;
        for (size_t i = 0; i < pb[u].size(); i++) d += std::pow(pb[u][i] - ref_params[u][i], 2), n += std::pow(ref_params[u][i], 2);
        EXPECT_LE(std::sqrt(d / n), 1e-5) << sub_world << " ranks, unit " << u;
      }
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
