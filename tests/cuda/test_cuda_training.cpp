// Whole training steps on the GPU against the CPU backend: a d2-shaped model (L2, NH2, C128, hs 64) trained
// for 10 AdamW steps from the same seed on the same batches, once per attention path. Skips without a GPU.
//
// Stated tolerances (bf16 compute against fp32 compute):
//  - per-step loss: |loss_cuda - loss_cpu| <= 2e-2 * loss_cpu. Every activation is rounded to bf16
//    (relative 2^-8 = 3.9e-3) about a dozen times between the embedding and the logits of a 2-layer model;
//    the cross-entropy moves by at most the logits' absolute error, which stays below 5 such roundings of
//    logits of size O(1) against a loss of ~5.5 nats at the start: 2e-2 relative leaves room for the
//    growth of that difference over 10 updates and still fails on any real bug (a wrong gradient changes
//    the loss curve by far more after a few steps at lr 3e-3).
//  - the loss must actually fall (step 10 < step 1 - 0.5 nats on this learnable stream) on both, so a run
//    that does not train cannot pass by matching another that does not train either.
//  - final parameters: ||p_cuda - p_cpu|| <= 0.1 ||p_cpu - p_init|| per unit. AdamW normalises every update
//    (m / sqrt(v)), so a component whose gradient is mostly rounding noise can move differently in the two
//    runs; 10% of the distance each unit moved allows that and still catches a wrong gradient, which sends
//    the unit in another direction altogether (a difference of the order of the distance itself).
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "tests/common/test_paths.h"
#include "src/core/rng.h"
#include "src/dist/comm_world.h"
#include "src/io/data_loader.h"
#include "src/train/trainer.h"
#include "tests/common/learnable_shard.h"
#include "tests/common/tiny_config.h"

namespace gpt::test {
namespace {

TrainOptions d2_options(const std::string& dir, const std::string& device, const std::string& attention) {
  TrainOptions o;
  o.model = tiny_config(2, 2, 128, 128, 257);
  o.config_name = "custom";
  o.train_pattern = write_learnable_shard(dir, 257, 60000, 7);
  o.B = 4;
  o.T = 128;
  o.steps = 10;
  o.lr = 3e-3f;
  o.warmup = 2;
  o.device = device;
  o.attention = attention;
  o.quiet = true;
  o.tokenizer = "none";
  o.peak_tflops = 1;
  return o;
}

struct Run {
  std::vector<float> losses;
  std::vector<std::vector<float>> init, final;  // per unit, fp32 master weights
};

Run train(const TrainOptions& o) {
  auto comm = make_single_communicator();
  Trainer t(o, *comm);
  Run r;
  for (int u = 0; u < t.engine().num_units(); u++) r.init.push_back(t.engine().gather_unit_to_host(u));
  for (int i = 0; i < o.steps; i++) r.losses.push_back(t.step().loss);
  for (int u = 0; u < t.engine().num_units(); u++) r.final.push_back(t.engine().gather_unit_to_host(u));
  return r;
}

void check_cuda_matches_cpu(const std::string& attention) {
  if (!gpt::cuda_available()) GTEST_SKIP() << "no CUDA GPU visible";
  const std::string dir = scratch_dir();
  const Run cpu = train(d2_options(dir, "cpu", "simple"));
  const Run gpu = train(d2_options(dir, "cuda", attention));
  ASSERT_EQ(gpu.losses.size(), cpu.losses.size());
  for (size_t i = 0; i < cpu.losses.size(); i++)
    EXPECT_NEAR(gpu.losses[i], cpu.losses[i], 2e-2 * cpu.losses[i]) << attention << " step " << i + 1;
  EXPECT_LT(cpu.losses.back(), cpu.losses.front() - 0.5f) << "the cpu run does not learn";
  EXPECT_LT(gpu.losses.back(), gpu.losses.front() - 0.5f) << "the cuda run does not learn";
  ASSERT_EQ(gpu.init, cpu.init) << "both runs must start from the same fp32 master weights";
  for (size_t u = 0; u < cpu.final.size(); u++) {
    double diff = 0, moved = 0;
    for (size_t i = 0; i < cpu.final[u].size(); i++) {
      diff += std::pow(double(gpu.final[u][i]) - cpu.final[u][i], 2);
      moved += std::pow(double(cpu.final[u][i]) - cpu.init[u][i], 2);
    }
    EXPECT_LE(std::sqrt(diff), 0.1 * std::sqrt(moved)) << attention << " unit " << u;
  }
}

TEST(CudaTraining, D2TenStepsMatchCpuSimpleAttention) { check_cuda_matches_cpu("simple"); }
TEST(CudaTraining, D2TenStepsMatchCpuFusedAttention) { check_cuda_matches_cpu("fused"); }
TEST(CudaTraining, D2TenStepsMatchCpuCudnnAttention) {
  if (gpt::cuda_available()) {
    const std::string why = cudnn_attention_unsupported(128, 2, planning_attention_target().cudnn);
    if (!why.empty()) GTEST_SKIP() << "--attention cudnn on this GPU: " << why;
  }
  check_cuda_matches_cpu("cudnn");
}

}  // namespace
}  // namespace gpt::test
