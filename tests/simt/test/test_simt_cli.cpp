// The whole program on the emulated GPU (gpt_simt, --device cuda): training with each attention path the
// emulator has, its memory plan against the CUDA backend's ledger to the byte (the check the GPU run makes,
// here on the same backend code and the same ledger), a resumed run that goes on where the checkpoint left
// off, sampling through the key/value cache, offload under every stream schedule, and sharded GPU ranks.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

#include "tests/common/json_lite.h"
#include "tests/common/test_paths.h"

namespace gpt::test {
namespace {

const std::string kModel = "--n-layer 2 --n-head 2 --d-model 64 --seq-len 32 --tokenizer byte ";
const std::string kBatch = "-B 2 -T 32 ";

// Every line of a metrics file, parsed.
std::vector<JValue> metrics(const std::string& path) {
  std::vector<JValue> rows;
  std::istringstream in(read_log(path));
  for (std::string line; std::getline(in, line);)
    if (!line.empty() && line[0] == '{') rows.push_back(parse_json(line));
  return rows;
}

// The device peak gpt memplan predicts for the run (`extra`: its batch, world and sharding flags).
double planned_peak(const std::string& attention, const std::string& extra = kBatch) {
  const CliResult r = run_gpt("memplan " + kModel + extra + "--device cuda --attention " + attention + " --json");
  EXPECT_EQ(r.code, 0) << r.out;
  const size_t brace = r.out.rfind("\n{");
  return parse_json(r.out.substr(brace == std::string::npos ? 0 : brace + 1)).at("device_peak_bytes").num;
}

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

// Offload's copies run on their own stream, ordered against compute by events only. Under the emulator's
// phased streams (tests/simt/streams.h) each stream runs ahead of the other in some phase, so a missing wait
// changes what a kernel or the host reads; GPT_SIMT_STREAMS=issue runs all work in call order instead. The
// models the two schedules write must be the same bytes, for each offload mode. Offloading the parameters or
// only the optimizer runs the same host AdamW on the same gradients, so those two models agree as well.
TEST(SimtCli, OffloadTrainsTheSameModelUnderEveryStreamSchedule) {
  const std::string d = shakespeare_byte_dir(), dir = scratch_dir();
  auto model = [&](const std::string& offload, const char* schedule) {
    const std::string out = dir + "/" + offload + "_" + schedule;
    setenv("GPT_SIMT_STREAMS", schedule, 1);
    const CliResult r = run_gpt("train " + kModel + kBatch + "--steps 4 --sample-tokens 0 --train '" + d +
                                "/train_*.bin' --device cuda --attention fused --offload " + offload + " --out " + out);
    unsetenv("GPT_SIMT_STREAMS");
    EXPECT_EQ(r.code, 0) << r.out;
    const std::string bytes = read_log(out + "/model.bin");
    EXPECT_GT(bytes.size(), 0u) << offload << " " << schedule;
    return bytes;
  };
  std::string host_adamw;
  for (const std::string offload : {"none", "params", "optimizer"}) {
    const std::string phased = model(offload, "phases");
    EXPECT_TRUE(phased == model(offload, "issue")) << "--offload " << offload << ": the schedule changed the model";
    if (offload == "none") continue;
    if (host_adamw.empty()) host_adamw = phased;
    EXPECT_TRUE(phased == host_adamw) << "--offload " << offload << " differs from --offload params";
  }
}

// `gpt_simt <args>` on n ranks under mpiexec, each rank with an emulated GPU of its own (GPT_SIMT_DEVICES),
// under the given stream schedule; returns the model file it wrote to `out`.
std::string ranks_model(int n, const std::string& args, const char* schedule, const std::string& out) {
  std::string output;
  const int code = run_command(
      "export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1 GPT_SIMT_DEVICES=" +
          std::to_string(n) + " GPT_SIMT_STREAMS=" + schedule + "; timeout 300 mpiexec -n " + std::to_string(n) +
          " --oversubscribe -x GPT_SIMT_DEVICES -x GPT_SIMT_STREAMS " + gpt_binary() + " " + args + " --out " + out,
      &output);
  EXPECT_EQ(code, 0) << args << "\n" << output;
  const std::string bytes = read_log(out + "/model.bin");
  EXPECT_GT(bytes.size(), 0u) << args << "\n" << output;
  return bytes;
}

// GPU ranks: the NCCL communicator (emulated over MPI, tests/simt/nccl.cpp) and the FSDP engine on the cuda
// backend, with the collectives on their own stream. Each strategy trains the same model bytes under the
// phased streams and in call order, so no gather, reduce-scatter or offload copy is used before it is done
// or overwritten while in flight; hybrid sharding runs on 4 ranks (two shard groups of 2, one shared comm
// stream) with the parameters offloaded. grad_op differs from full only in keeping the gathered parameters
// from the forward to the backward, so the two train the same bytes. Each strategy's largest rank peak on
// the CUDA ledger is the peak `gpt memplan --world N --device cuda` predicts, to the byte.
TEST(SimtCli, ShardedGpuRanksTrainTheSameModelUnderEveryStreamSchedule) {
#ifndef GPT_WITH_NCCL
  GTEST_SKIP() << "this build has no MPI, so the emulated NCCL has nothing to run over";
#endif
  if (run_command("command -v mpiexec") != 0) GTEST_SKIP() << "mpiexec not installed";
  const std::string d = shakespeare_byte_dir(), dir = scratch_dir();
  const std::string train = "train " + kModel + "-T 32 --steps 3 --sample-tokens 0 --train '" + d +
                            "/train_*.bin' --device cuda --attention fused ";
  std::string full;
  for (const std::string shard : {"full", "grad_op", "none"}) {
    const std::string args = train + "-B 2 --shard " + shard, m = dir + "/" + shard + ".jsonl";
    const std::string phased = ranks_model(2, args + " --metrics " + m, "phases", dir + "/" + shard + "_phases");
    EXPECT_TRUE(phased == ranks_model(2, args, "issue", dir + "/" + shard + "_issue"))
        << "--shard " << shard << ": the schedule changed the model";
    const double plan = planned_peak("fused", "-B 2 -T 32 --world 2 --shard " + shard + " ");
    const std::vector<JValue> rows = metrics(m);
    EXPECT_EQ(rows.size(), 3u) << read_log(m);
    for (const JValue& row : rows)
      EXPECT_EQ(row.at("max_rank_device_peak_bytes").num, plan)
          << "--shard " << shard << ": memplan against the ledger";
    if (shard == "full") full = phased;
    if (shard == "grad_op") {
      EXPECT_TRUE(phased == full) << "--shard grad_op differs from --shard full";
    }
  }
  const std::string hybrid = train + "-B 1 --shard hybrid --shard-group 2 --offload params";
  EXPECT_TRUE(ranks_model(4, hybrid, "phases", dir + "/hybrid_phases") ==
              ranks_model(4, hybrid, "issue", dir + "/hybrid_issue"))
      << "--shard hybrid: the schedule changed the model";
}

}  // namespace
}  // namespace gpt::test
