// The Trainer end to end on one process: resume from a checkpoint is bit-identical to an uninterrupted
// run; the NaN guard skips an update without touching params or optimizer state; recompute modes are
// bit-identical to none; a short Tiny Shakespeare run goes well below the unigram baseline.
#include <gtest/gtest.h>

#include <cmath>
#include <map>

#include "tests/common/test_paths.h"
#include "src/core/check.h"
#include "src/core/rng.h"
#include "src/dist/comm_world.h"
#include "src/io/atomic_file.h"
#include "src/io/data_loader.h"
#include "src/train/trainer.h"
#include "tests/common/learnable_shard.h"
#include "tests/common/tiny_config.h"
#include "tests/common/tiny_trainer.h"

namespace gpt::test {
namespace {

std::vector<std::vector<float>> all_params(Trainer& t) {
  std::vector<std::vector<float>> p;
  for (int u = 0; u < t.engine().num_units(); u++) p.push_back(t.engine().gather_unit_to_host(u));
  return p;
}

TEST(Trainer, ResumeIsBitIdenticalToAnUninterruptedRun) {
  const std::string dir = scratch_dir();
  auto comm = make_single_communicator();
  TrainOptions o = tiny_train_options(dir);
  o.total_batch = (int64_t)o.B * o.T * 2;  // gradient accumulation of 2
  std::vector<float> losses_full;
  Trainer full(o, *comm);
  for (int i = 0; i < 8; i++) losses_full.push_back(full.step().loss);

  TrainOptions a = o;
  a.out_dir = dir + "/run";
  Trainer first(a, *comm);
  for (int i = 0; i < 4; i++) first.step();
  first.save();
  TrainOptions b = a;
  b.resume = true;
  Trainer second(b, *comm);
  EXPECT_EQ(second.progress().step, 4);
  for (int i = 4; i < 8; i++) EXPECT_EQ(second.step().loss, losses_full[i]) << "step " << i + 1;
  EXPECT_EQ(all_params(second), all_params(full));
}

TEST(Trainer, NonFiniteStepLeavesParametersAndStateUntouched) {
  const std::string dir = scratch_dir();
  auto comm = make_single_communicator();
  Trainer t(tiny_train_options(dir), *comm);
  t.step();
  auto before = all_params(t);
  std::vector<float> m_before;
  t.engine().shard_to_host(1, ShardState::adam_m, m_before);
  t.inject_nonfinite_once();
  StepStats s = t.step();
  EXPECT_TRUE(s.skipped);
  EXPECT_EQ(all_params(t), before);
  std::vector<float> m_after;
  t.engine().shard_to_host(1, ShardState::adam_m, m_after);
  EXPECT_EQ(m_after, m_before);
  EXPECT_FALSE(t.step().skipped);  // the next healthy step updates again
  EXPECT_NE(all_params(t), before);
}

// PyTorch leaves AdamW's step count alone when optimizer.step() is skipped, so the first update applied
// after a skipped first step is AdamW's first: m_hat = g, v_hat = g^2, and each element moves by
// lr * g / (|g| + eps), i.e. by lr wherever |g| >> eps (no weight decay here). Had the skipped step advanced
// the count to t = 2, the same update would be lr * sqrt(1 + beta2) / (1 + beta1) = 0.735 lr. Bound on the
// largest move: fp32 rounding of the updated parameter (|p| <= 2, so 2^-22 absolute, 2.4e-5 of lr = 1e-2)
// plus eps / max|g| (1e-5 for max|g| >= 1e-3); 1e-3 of lr covers both and is 265 times smaller than the gap.
TEST(Trainer, SkippedStepLeavesAdamWsCountWhereItIs) {
  const std::string dir = scratch_dir();
  auto comm = make_single_communicator();
  TrainOptions o = tiny_train_options(dir);
  o.lr = 1e-2f;
  o.warmup = 0;
  o.optim.weight_decay = 0;
  o.optim.grad_clip = 0;
  o.out_dir = dir + "/run";
  Trainer t(o, *comm);
  t.inject_nonfinite_once();
  ASSERT_TRUE(t.step().skipped);
  const auto before = all_params(t);
  const StepStats s = t.step();
  ASSERT_FALSE(s.skipped);
  const auto after = all_params(t);
  double largest = 0;
  for (size_t u = 0; u < before.size(); u++)
    for (size_t i = 0; i < before[u].size(); i++)
      largest = std::max(largest, std::fabs((double)after[u][i] - before[u][i]));
  EXPECT_NEAR(largest / s.lr, 1.0, 1e-3) << "the first applied update moved parameters by at most " << largest
                                        << " at lr " << s.lr;
  EXPECT_EQ(t.progress().step, 2);
  EXPECT_EQ(t.progress().updates, 1);
  t.save();  // the count travels with the checkpoint
  TrainOptions r = o;
  r.resume = true;
  Trainer resumed(r, *comm);
  EXPECT_EQ(resumed.progress().step, 2);
  EXPECT_EQ(resumed.progress().updates, 1);
}

TEST(Trainer, TooManyBadStepsStopsWithAMessage) {
  const std::string dir = scratch_dir();
  auto comm = make_single_communicator();
  TrainOptions o = tiny_train_options(dir);
  o.max_bad_steps = 2;
  Trainer t(o, *comm);
  t.inject_nonfinite_once();
  t.step();
  t.inject_nonfinite_once();
  try {
    t.step();
    ADD_FAILURE() << "expected a stop";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--max-bad-steps"), std::string::npos) << e.what();
  }
}

TEST(Trainer, RecomputeAndOffloadModesAreBitIdentical) {
  const std::string dir = scratch_dir();
  auto comm = make_single_communicator();
  TrainOptions o = tiny_train_options(dir);
  o.model.num_layers = 3;
  o.model.finalize();
  Trainer base(o, *comm);
  std::vector<float> losses;
  for (int i = 0; i < 6; i++) losses.push_back(base.step().loss);
  for (const char* mode : {"full", "every:2", "selective"}) {
    TrainOptions r = o;
    r.recompute = RecomputePolicy::parse(mode);
    Trainer t(r, *comm);
    for (int i = 0; i < 6; i++) EXPECT_EQ(t.step().loss, losses[i]) << mode << " step " << i + 1;
    EXPECT_EQ(all_params(t), all_params(base)) << mode;
  }
  for (const char* mode : {"optimizer", "params"}) {
    TrainOptions r = o;
    r.fsdp.offload = FsdpOptions::parse_offload(mode);
    Trainer t(r, *comm);
    for (int i = 0; i < 6; i++) EXPECT_EQ(t.step().loss, losses[i]) << "offload " << mode << " step " << i + 1;
    EXPECT_EQ(all_params(t), all_params(base)) << "offload " << mode;
  }
}

// Tiny Shakespeare at byte level: a short run must beat the unigram model (the entropy of the byte
// distribution of the training text, computed here from counts) by a wide margin.
TEST(Trainer, TinyShakespeareBeatsTheUnigramBaseline) {
  const std::string dir = scratch_dir();
  std::string text = read_file(source_dir() + "/data/tinyshakespeare/input.txt");
  const size_t n_val = text.size() / 10;
  std::vector<int> train(text.begin(), text.end() - n_val), val(text.end() - n_val, text.end());
  for (auto* v : {&train, &val})
    for (int& x : *v) x = (unsigned char)x;
  write_token_shard(dir + "/train_000000.bin", train);
  write_token_shard(dir + "/val_000000.bin", val);
  std::map<int, double> counts;
  for (int x : train) counts[x] += 1;
  double unigram = 0;
  for (auto& kv : counts) {
    const double p = kv.second / train.size();
    unigram -= p * std::log(p);
  }
  auto comm = make_single_communicator();
  TrainOptions o;
  o.model = tiny_config(2, 4, 128, 64, 257);
  o.train_pattern = dir + "/train_*.bin";
  o.val_pattern = dir + "/val_*.bin";
  o.B = 16;
  o.T = 64;
  o.steps = 250;
  o.lr = 5e-3f;
  o.warmup = 25;
  o.device = "cpu";
  o.quiet = true;
  o.tokenizer = "none";
  o.peak_tflops = 1;
  Trainer t(o, *comm);
  for (int i = 0; i < o.steps; i++) t.step();
  const float val_loss = t.evaluate(8);
  std::printf("unigram baseline %.3f nats, val loss after %d steps %.3f\n", unigram, o.steps, val_loss);
  EXPECT_LT(val_loss, unigram - 0.6);
}

}  // namespace
}  // namespace gpt::test
