// Checkpoints across tensor-parallel sizes (4 ranks): a d4 run on Tiny Shakespeare's bytes saved at step 10
// as T = 2 x DP = 2 resumes at T = 1 x DP = 4 and at T = 4 x DP = 1, and steps 11 to 20 follow the
// uninterrupted T = 2 x DP = 2 run: within 1e-5 relative of it, and within the noise floor's parity bound of
// the one-process run (test_tp_parity.cpp says why that bound holds for tensor parallelism). The files record
// the size; loading reads each rank's slices through the whole tensors (src/train/checkpoint.cpp).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>

#include "src/train/checkpoint.h"
#include "tests/common/test_paths.h"
#include "tests/common/tiny_config.h"
#include "tests/fsdp/fsdp_run.h"
#include "tests/fsdp/mpi_world.h"
#include "tests/fsdp/noise_floor.h"

namespace gpt::test {
namespace {

constexpr int kSteps = 20, kSaveAt = 10;

const std::vector<int>& corpus() {
  static const std::vector<int> bytes = [] {
    std::ifstream f(source_dir() + "/data/tinyshakespeare/input.txt", std::ios::binary);
    std::vector<int> out;
    for (std::istreambuf_iterator<char> it(f), end; it != end; ++it) out.push_back((unsigned char)*it);
    return out;
  }();
  return bytes;
}

RunSpec spec(int tp) {
  RunSpec s;
  s.cfg = tiny_config(4, 4, 256, 16, 257);
  s.T = 16;
  s.global_seqs = 24;
  s.accum = 2;
  s.corpus = &corpus();
  s.seed = 7;
  s.lr = 6e-4f;  // as test_tp_parity.cpp, which says why
  s.tp.size = tp;
  s.tp.sequence_parallel = tp > 1;
  return s;
}

TEST(TpCheckpoint, SavedAtTwoByTwoResumesAtOneByFourAndFourByOne) {
  Communicator& w = world();
  if (w.world() != 4) GTEST_SKIP() << "the meshes 2x2, 1x4 and 4x1 need 4 ranks";
  RunSpec ref = spec(1);
  ref.accum = 1;
  const NoiseFloor f = measure_noise_floor(ref, kSteps, w);
  const std::string dir = (std::filesystem::temp_directory_path() / "gpt_tp_checkpoint").string();
  if (w.rank() == 0) std::filesystem::remove_all(dir);
  w.barrier();

  std::vector<float> straight;  // the uninterrupted T = 2 x DP = 2 run
  {
    ShardedRun run(spec(2), w);
    for (int s = 0; s < kSteps; s++) {
      straight.push_back(run.train_step());
      if (s + 1 == kSaveAt) {
        TrainProgress p;
        p.step = p.updates = kSaveAt;
        save_checkpoint(dir, *run.engine, p, 1, &w);
      }
    }
  }
  for (int tp : {1, 4}) {
    ShardedRun run(spec(tp), w);
    const TrainProgress p = load_checkpoint(find_latest_checkpoint(dir), *run.engine, true, &w);
    EXPECT_EQ(p.step, kSaveAt);
    EXPECT_EQ(p.saved_tp, 2);
    run.step = (int)p.updates;  // AdamW's count
    for (int s = kSaveAt; s < kSteps; s++) {
      const float loss = run.train_step();
      EXPECT_LE(rel(loss, straight[s]), 1e-5) << "tp " << tp << " step " << s + 1 << ": " << loss << " vs "
                                              << straight[s];
      EXPECT_LE(rel(loss, f.ref.losses[s]), f.loss_bound(s)) << "tp " << tp << " step " << s + 1;
    }
    const ParityMeasure m = measure_parity(f, {}, 0, run.params());
    EXPECT_LE(m.params_diff, f.params_bound()) << "tp " << tp << ": floor " << f.params;
  }
}

}  // namespace
}  // namespace gpt::test
