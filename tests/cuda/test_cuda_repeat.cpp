// Bit-for-bit properties of whole GPU training runs (d2 shape, 3 steps, both attention paths). Skips without
// a GPU.
//  - A run repeats bit for bit: every kernel's reductions run in a fixed order, the embedding backward has no
//    atomics (encoder.cu), and cuBLASLt runs the same planned algorithm for the same shape.
//  - --recompute full and every:2 equal none bit for bit: a recomputed layer re-runs the forward's own ops
//    on the same inputs (the fused residual + layernorm, the product with the GELU epilogue), so backward
//    sees the values the forward produced.
//  - --recompute selective repeats bit for bit and trains like none: its forward runs the GELU as a kernel
//    on the stored pre-activation (what its recompute re-runs), not in the product's epilogue, so its values
//    differ from none's by bf16 roundings; its losses stay within the loss bound of test_cuda_training.cpp.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "src/dist/comm_world.h"
#include "src/train/trainer.h"
#include "tests/common/learnable_shard.h"
#include "tests/common/test_paths.h"
#include "tests/common/tiny_config.h"

namespace gpt::test {
namespace {

TrainOptions options(const std::string& dir, const std::string& attention, const std::string& recompute) {
  TrainOptions o;
  o.model = tiny_config(2, 2, 128, 128, 257);
  o.config_name = "custom";
  o.train_pattern = write_learnable_shard(dir, 257, 60000, 7);
  o.B = 4;
  o.T = 128;
  o.steps = 3;
  o.lr = 3e-3f;
  o.warmup = 1;
  o.device = "cuda";
  o.attention = attention;
  o.recompute = RecomputePolicy::parse(recompute);
  o.quiet = true;
  o.tokenizer = "none";
  o.peak_tflops = 1;
  return o;
}

struct Result {
  std::vector<float> losses;
  std::vector<double> norms;
  std::vector<std::vector<float>> params;
};

Result run(const TrainOptions& o) {
  auto comm = make_single_communicator();
  Trainer t(o, *comm);
  Result r;
  for (int i = 0; i < o.steps; i++) {
    const StepStats s = t.step();
    r.losses.push_back(s.loss);
    r.norms.push_back(s.grad_norm);
  }
  for (int u = 0; u < t.engine().num_units(); u++) r.params.push_back(t.engine().gather_unit_to_host(u));
  return r;
}

void expect_identical(const Result& a, const Result& b, const std::string& what) {
  EXPECT_EQ(a.losses, b.losses) << what;
  EXPECT_EQ(a.norms, b.norms) << what;
  ASSERT_EQ(a.params.size(), b.params.size());
  for (size_t u = 0; u < a.params.size(); u++) EXPECT_EQ(a.params[u], b.params[u]) << what << ", unit " << u;
}

void check(const std::string& attention) {
  if (!gpt::cuda_available()) GTEST_SKIP() << "no CUDA GPU visible";
  const std::string dir = scratch_dir();
  const Result none = run(options(dir, attention, "none"));
  expect_identical(none, run(options(dir, attention, "none")), attention + ": none run twice");
  expect_identical(none, run(options(dir, attention, "full")), attention + ": full against none");
  expect_identical(none, run(options(dir, attention, "every:2")), attention + ": every:2 against none");
  const Result selective = run(options(dir, attention, "selective"));
  expect_identical(selective, run(options(dir, attention, "selective")), attention + ": selective run twice");
  for (size_t i = 0; i < none.losses.size(); i++)
    EXPECT_NEAR(selective.losses[i], none.losses[i], 2e-2 * none.losses[i]) << attention << " step " << i + 1;
}

TEST(CudaRepeat, RunsRepeatAndRecomputeIsExactSimpleAttention) { check("simple"); }
TEST(CudaRepeat, RunsRepeatAndRecomputeIsExactFusedAttention) { check("fused"); }

}  // namespace
}  // namespace gpt::test
