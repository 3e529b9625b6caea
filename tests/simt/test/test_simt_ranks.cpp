// GPU ranks on the emulated machine: gpt_simt under mpiexec, each rank with an emulated GPU of its own
// (GPT_SIMT_DEVICES), the NCCL communicator emulated over MPI (tests/simt/nccl.cpp) and the FSDP engine on
// the cuda backend, with the collectives on their own stream and the offload copies on theirs. A model that
// is the same bytes under every stream schedule of the emulator (tests/simt/streams.h: each of the compute,
// copy and comm streams running ahead of the others, all lazy, and the drawn phases) as in call order
// (GPT_SIMT_STREAMS=issue) used no gather, reduce-scatter or copy before it was done, and overwrote none in
// flight.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "tests/common/json_lite.h"
#include "tests/common/test_paths.h"
#include "tests/simt/test/simt_cli.h"

namespace gpt::test {
namespace {

std::string train_args() {
  return "train " + kModel + "-T 32 --sample-tokens 0 --train '" + shakespeare_byte_dir() +
         "/train_*.bin' --device cuda --attention fused ";
}

// Each strategy on 2 ranks: the same model under every schedule, and each step's largest rank peak on the
// CUDA ledger is the peak `gpt memplan --world 2 --device cuda` predicts, to the byte. grad_op differs from
// full only in keeping the gathered parameters from the forward to the backward: the same bytes.
TEST(SimtRanks, EveryStrategyTrainsTheSameModelUnderEveryStreamSchedule) {
  SKIP_WITHOUT_RANKS();
  const std::string dir = scratch_dir();
  std::string full;
  for (const std::string shard : {"full", "grad_op", "none"}) {
    const std::string args = train_args() + "--steps 3 -B 2 --shard " + shard, m = dir + "/" + shard + ".jsonl";
    const std::string model = expect_schedule_free(2, args, dir + "/" + shard, " --metrics " + m);
    const double plan = planned_peak("fused", "-B 2 -T 32 --world 2 --shard " + shard + " ");
    const std::vector<JValue> rows = metrics(m);
    EXPECT_EQ(rows.size(), 3u) << read_log(m);
    for (const JValue& row : rows)
      EXPECT_EQ(row.at("max_rank_device_peak_bytes").num, plan) << "--shard " << shard << ": memplan vs ledger";
    if (shard == "full") full = model;
    if (shard == "grad_op") {
      EXPECT_TRUE(model == full) << "--shard grad_op differs from --shard full";
    }
  }
}

// The levers on GPU ranks, each the same model under every schedule: gradient accumulation with and without
// --no-sync, bf16 reduction, selective recompute with the optimizer offloaded, and hybrid sharding on 4 ranks
// (two shard groups of 2 on one shared comm stream) with the parameters offloaded.
TEST(SimtRanks, LeversTrainTheSameModelUnderEveryStreamSchedule) {
  SKIP_WITHOUT_RANKS();
  const std::string dir = scratch_dir();
  const struct {
    int ranks;
    const char* flags;
  } cases[] = {{2, "-B 2 --total-batch 256"},
               {2, "-B 2 --total-batch 256 --no-sync"},
               {2, "-B 2 --reduce-dtype bf16"},
               {2, "-B 2 --recompute selective --offload optimizer"},
               {4, "-B 1 --shard hybrid --shard-group 2 --offload params"}};
  int k = 0;
  for (const auto& c : cases) {
    expect_schedule_free(c.ranks, train_args() + "--steps 3 " + c.flags, dir + "/" + std::to_string(k++));
  }
}

// A resumed run on GPU ranks goes on bit for bit (the sharded AdamW state comes back exactly). Resumed on 4
// ranks instead (resharded), its first step evaluates the restored weights on the same global batch: each
// sequence's per-position losses are the same bits at B=1 as at B=2 (every kernel and product works per row),
// and only the mean over the 128 positions is summed in another order. Each order's sum is within
// 127 * 2^-24 * sum|x| of the exact one, so the two means differ by at most 2 * 127 * 2^-24 * |loss| (about
// 8.4e-5 here), plus the 1e-6 the metrics file rounds the two values to.
TEST(SimtRanks, ResumeGoesOnBitForBitAndReshards) {
  SKIP_WITHOUT_RANKS();
  const std::string dir = scratch_dir(), run = dir + "/run", reshard = dir + "/reshard";
  const std::string args = train_args() + "--steps 4 --save-every 2 ";
  const std::string whole = ranks_model(2, args + "-B 2 --metrics " + dir + "/whole.jsonl", "phases", run);
  ASSERT_EQ(run_command("cp -r " + run + " " + reshard + " && rm -rf " + run + "/ckpt_00000004 " + run + "/model.bin " +
                        reshard + "/ckpt_00000004 " + reshard + "/model.bin"),
            0);
  EXPECT_TRUE(ranks_model(2, args + "-B 2 --resume", "phases", run) == whole) << "resumed on 2 ranks";
  ranks_model(4, args + "-B 1 --resume --metrics " + dir + "/reshard.jsonl", "phases", reshard);
  const std::vector<JValue> a = metrics(dir + "/whole.jsonl"), b = metrics(dir + "/reshard.jsonl");
  ASSERT_EQ(a.size(), 4u);
  ASSERT_EQ(b.size(), 2u);
  EXPECT_EQ(b[0].at("step").num, 3);
  const double loss = a[2].at("loss").num;
  EXPECT_NEAR(b[0].at("loss").num, loss, 2 * 127 * std::ldexp(std::fabs(loss), -24) + 1e-6) << "resumed on 4 ranks";
  EXPECT_TRUE(std::isfinite(b[1].at("loss").num));
  std::printf("[reshard] step 3 loss: 2 ranks %.6f, resumed on 4 ranks %.6f\n", loss, b[0].at("loss").num);
}

}  // namespace
}  // namespace gpt::test
