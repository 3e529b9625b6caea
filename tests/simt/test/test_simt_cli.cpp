// The whole program on the emulated GPU (gpt_simt, --device cuda): training with each attention path the
// emulator has, its memory plan against the CUDA backend's ledger to the byte (the check the GPU run makes,
// here on the same backend code and the same ledger), a resumed run that goes on where the checkpoint left
// off, sampling through the key/value cache, and offload under every stream schedule.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <string>
#include <vector>

#include "tests/common/json_lite.h"
#include "tests/common/test_paths.h"
#include "tests/simt/test/simt_cli.h"

namespace gpt::test {
namespace {

TEST(SimtCli, TrainsOnTheEmulatedGpuWithThePlannedMemory) {
  const std::string d = shakespeare_byte_dir(), dir = scratch_dir();
  for (const std::string attention : {"simple", "fused"}) {
    const std::string m = dir + "/metrics_" + attention + ".jsonl";
    const CliResult r = run_gpt("train " + kModel + kBatch + "--steps 3 --sample-tokens 0 --train '" + d +
                                "/train_*.bin' --device cuda --attention " + attention + " --metrics " + m + " --out " +
                                dir + "/run_" + attention);
    ASSERT_EQ(r.code, 0) << r.out;
    const std::vector<JValue> rows = metrics(m);
    ASSERT_EQ(rows.size(), 3u) << read_log(m);
    const double plan = planned_peak(attention);
    for (const JValue& row : rows) {
      EXPECT_TRUE(std::isfinite(row.at("loss").num)) << attention;
      EXPECT_EQ(row.at("max_rank_device_peak_bytes").num, plan) << attention << ": memplan against the ledger";
    }
    // A fresh byte-level model starts near ln(257) = 5.55 nats.
    EXPECT_NEAR(rows[0].at("loss").num, std::log(257.0), 0.5) << attention;
  }
}

TEST(SimtCli, ResumesAndSamplesOnTheEmulatedGpu) {
  const std::string d = shakespeare_byte_dir(), dir = scratch_dir(), out = dir + "/run";
  const std::string train = "train " + kModel + kBatch + "--sample-tokens 0 --train '" + d +
                            "/train_*.bin' --device cuda --attention fused --save-every 2 --out " + out;
  ASSERT_EQ(run_gpt(train + " --steps 2 --metrics " + dir + "/a.jsonl").code, 0);
  const CliResult resumed = run_gpt(train + " --steps 4 --resume --metrics " + dir + "/b.jsonl");
  ASSERT_EQ(resumed.code, 0) << resumed.out;
  const std::vector<JValue> rows = metrics(dir + "/b.jsonl");
  ASSERT_EQ(rows.size(), 2u) << resumed.out;
  EXPECT_EQ(rows[0].at("step").num, 3) << "the resumed run goes on after the checkpoint's step";
  const CliResult sample = run_gpt("sample --model " + out + "/model.bin --tokenizer byte --device cuda --tokens 40 " +
                                   "--prompt ROMEO: --seed 3");
  ASSERT_EQ(sample.code, 0) << sample.out;
  EXPECT_NE(sample.out.find("ROMEO:"), std::string::npos) << sample.out;
}

// Offload's copies run on their own stream, ordered against compute by events only. Under each stream schedule
// of the emulator (tests/simt/streams.h: the compute and the copy stream each run ahead of the other, or
// both lazily) a missing wait changes what a kernel or the host reads; GPT_SIMT_STREAMS=issue runs all work
// in call order instead. The models must be the same bytes, for each offload mode. Offloading the
// parameters or only the optimizer runs the same host AdamW on the same gradients, so those agree as well;
// offloading the activations (alone, or with the parameters) changes where they wait, not what is computed:
// under every schedule its model is the one without it, on a model deep enough that the ring brings layers
// back.
TEST(SimtCli, OffloadTrainsTheSameModelUnderEveryStreamSchedule) {
  const std::string d = shakespeare_byte_dir(), dir = scratch_dir();
  // Activation offload needs more layers than its ring's 3 slots, or nothing is ever brought back.
  const std::string five = "--n-layer 5 --n-head 2 --d-model 64 --seq-len 32 --tokenizer byte ";
  auto model = [&](const std::string& shape, const std::string& offload, const std::string& schedule) {
    const std::string out = dir + "/" + offload + "_" + schedule + (shape == kModel ? "" : "_5");
    setenv("GPT_SIMT_STREAMS", schedule.c_str(), 1);
    const CliResult r = run_gpt("train " + shape + kBatch + "--steps 4 --sample-tokens 0 --train '" + d +
                                "/train_*.bin' --device cuda --attention fused --offload " + offload + " --out " + out);
    unsetenv("GPT_SIMT_STREAMS");
    EXPECT_EQ(r.code, 0) << r.out;
    const std::string bytes = read_log(out + "/model.bin");
    EXPECT_GT(bytes.size(), 0u) << offload << " " << schedule;
    return bytes;
  };
  std::string host_adamw;
  for (const std::string offload : {"none", "params", "optimizer"}) {
    const std::string reference = model(kModel, offload, "issue");
    for (const std::string& schedule : schedules(2))  // the compute stream and the copy stream
      EXPECT_TRUE(model(kModel, offload, schedule) == reference) << "--offload " << offload << ": " << schedule;
    if (offload == "none") continue;
    if (host_adamw.empty()) host_adamw = reference;
    EXPECT_TRUE(reference == host_adamw) << "--offload " << offload << " differs from --offload params";
  }
  // Activation offload moves bits: with it the run is the one without it, alone and beside the parameters'.
  for (auto [offload, without] : {std::pair{"activations", "none"}, std::pair{"params,activations", "params"}}) {
    const std::string reference = model(five, without, "issue");
    for (const std::string& schedule : schedules(2))
      EXPECT_TRUE(model(five, offload, schedule) == reference) << "--offload " << offload << ": " << schedule
                                                               << " differs from --offload " << without;
  }
}

}  // namespace
}  // namespace gpt::test
