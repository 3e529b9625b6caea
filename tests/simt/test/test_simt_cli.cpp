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
// offloading the activations (alone, or with the parameters) changes where they wait, not what is computed.
TEST(SimtCli, OffloadTrainsTheSameModelUnderEveryStreamSchedule) {
  const std::string d = shakespeare_byte_dir(), dir = scratch_dir();
  auto model = [&](const std::string& offload, const std::string& schedule) {
    const std::string out = dir + "/" + offload + "_" + schedule;
    setenv("GPT_SIMT_STREAMS", schedule.c_str(), 1);
    const CliResult r = run_gpt("train " + kModel + kBatch + "--steps 4 --sample-tokens 0 --train '" + d +
                                "/train_*.bin' --device cuda --attention fused --offload " + offload + " --out " + out);
    unsetenv("GPT_SIMT_STREAMS");
    EXPECT_EQ(r.code, 0) << r.out;
    const std::string bytes = read_log(out + "/model.bin");
    EXPECT_GT(bytes.size(), 0u) << offload << " " << schedule;
    return bytes;
  };
  std::string host_adamw, device_states;
  for (const std::string offload : {"none", "params", "optimizer", "activations", "params,activations"}) {
    const std::string reference = model(offload, "issue");
    for (const std::string& schedule : schedules(2))  // the compute stream and the copy stream
      EXPECT_TRUE(model(offload, schedule) == reference) << "--offload " << offload << ": " << schedule;
    // Activation offload moves bits: with it the run is the one without it.
    if (offload == "none") device_states = reference;
    if (offload == "activations") EXPECT_TRUE(reference == device_states) << "--offload activations differs from none";
    if (offload == "none" || offload == "activations") continue;
    if (host_adamw.empty()) host_adamw = reference;
    EXPECT_TRUE(reference == host_adamw) << "--offload " << offload << " differs from --offload params";
  }
}

}  // namespace
}  // namespace gpt::test
