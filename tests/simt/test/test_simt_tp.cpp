// Tensor parallelism on emulated GPU ranks: gpt_simt under mpiexec, each rank an emulated GPU, the group's
// collectives on NCCL (emulated over MPI) in bf16 on the shared comm stream, waited for by the compute stream
// on the device. Against one GPU training the same global batch from the same seed, for T = 2 with and
// without sequence parallelism, T = 4, and T = 2 x DP = 2:
//
// 1. Losses within a derived bf16 bound. One GPU rounds each row-parallel product (attproj, fcproj) to bf16
//    once; a group of T rounds each rank's partial product to bf16 and NCCL rounds each of the T - 1 additions
//    of the bf16 sum: 2T - 2 more roundings of relative 2^-8 per product, 2 products per block, L = 2 blocks:
//    K = 4 L (T - 1) extra roundings on the way to the logits (the embedding's sum adds one nonzero to zeros,
//    exact; the gathers copy; the loss's statistics are fp32). As in test_cuda_training.cpp, the loss moves by
//    at most the logits' absolute error, K roundings of O(1) activations, against a loss of ~5.5 nats; doubled
//    for its growth over the 4 updates: |loss_T - loss_1| <= 2 K 2^-8 / 5.5 * loss_1 (1.1% at T = 2, 3.4% at
//    T = 4). Both runs must also train (the last step's loss below the first's).
// 2. The same bytes under every stream schedule of the emulator as in call order (T = 2, sequence parallelism:
//    the collective-heavy case), and a run repeated gives the same bytes (T = 4); two steps each.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "src/core/check.h"
#include "tests/common/json_lite.h"
#include "tests/common/test_paths.h"
#include "tests/simt/test/simt_cli.h"

namespace gpt::test {
namespace {

constexpr int kLayers = 2, kSteps = 4;

// 4 heads of 32 (the fused attention's head size), so T = 4 has one head per rank
std::string args(int B, int steps = kSteps) {
  return "train --n-layer 2 --n-head 4 --d-model 128 --seq-len 32 --tokenizer byte -T 32 --sample-tokens 0 --train '" + shakespeare_byte_dir() +
         "/train_*.bin' --device cuda --attention fused --steps " + std::to_string(steps) + " -B " + std::to_string(B) + " ";
}

double bound_rel(int T) { return 2.0 * 4 * kLayers * (T - 1) * std::ldexp(1.0, -8) / 5.5; }

std::vector<double> losses(const std::string& metrics_file) {
  std::vector<double> out;
  for (const JValue& row : metrics(metrics_file)) out.push_back(row.at("loss").num);
  return out;
}

TEST(SimtTp, TensorParallelTrainsWhatOneGpuTrains) {
  SKIP_WITHOUT_RANKS();
  const std::string dir = scratch_dir();
  ranks_model(1, args(2) + "--metrics " + dir + "/one.jsonl", "issue", dir + "/one");
  const std::vector<double> one = losses(dir + "/one.jsonl");
  ASSERT_EQ(one.size(), (size_t)kSteps);
  EXPECT_LT(one.back(), one.front()) << "one GPU does not train";
  const struct {
    int ranks, tp, B;
    const char* flags;
  } cases[] = {{2, 2, 2, ""}, {2, 2, 2, "--sequence-parallel off"}, {4, 4, 2, ""}, {4, 2, 1, "--shard full"}};
  for (const auto& c : cases) {
    const std::string label = str("T=", c.tp, " ranks=", c.ranks, " ", c.flags), m = dir + "/tp.jsonl";
    ranks_model(c.ranks, args(c.B) + "--tp " + std::to_string(c.tp) + " " + c.flags + " --metrics " + m, "issue",
                dir + "/tp");
    const std::vector<double> tp = losses(m);
    ASSERT_EQ(tp.size(), (size_t)kSteps) << label;
    double worst = 0;
    for (int s = 0; s < kSteps; s++) {
      EXPECT_LE(std::fabs(tp[s] - one[s]), bound_rel(c.tp) * one[s]) << label << " step " << s + 1;
      worst = std::max(worst, std::fabs(tp[s] - one[s]) / one[s]);
    }
    std::printf("[simt-tp] %s: largest relative loss difference %.3e, bound %.3e\n", label.c_str(), worst,
                bound_rel(c.tp));
    EXPECT_LT(tp.back(), tp.front()) << label << " does not train";
  }
}

TEST(SimtTp, EveryStreamScheduleAndARepeatGiveTheSameBytes) {
  SKIP_WITHOUT_RANKS();
  const std::string dir = scratch_dir();
  // two steps: the second runs forward and backward on weights the first's optimizer step wrote
  expect_schedule_free(2, args(2, 2) + "--tp 2", dir + "/t2");
  const std::string a = ranks_model(4, args(2, 2) + "--tp 4", "phases", dir + "/a");
  EXPECT_TRUE(ranks_model(4, args(2, 2) + "--tp 4", "phases", dir + "/b") == a) << "T = 4 repeated";
}

}  // namespace
}  // namespace gpt::test
