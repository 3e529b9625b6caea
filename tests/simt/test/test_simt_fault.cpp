// A device fault (a kernel's illegal address: sticky on a GPU, so every later CUDA call returns it) ends the run
// with its error printed and exit status 1: not std::terminate from a destructor that waited for the lost
// device, and on several ranks not a wait of --timeout for peers that will never come. GPT_SIMT_FAULT_AT
// (tests/simt/executor.cpp) makes the process's N-th kernel launch fault as it runs; a step of this model
// launches about 90 kernels, so launch 200 faults in the middle of the third step.
#include <gtest/gtest.h>

#include <chrono>
#include <string>

#include "tests/common/test_paths.h"
#include "tests/simt/test/simt_cli.h"

namespace gpt::test {
namespace {

const std::string kTrain = "train " + kModel + kBatch + "--sample-tokens 0 --steps 4 --device cuda --attention fused ";

void expect_the_fault_reported(const CliResult& r) {
  EXPECT_NE(r.out.find("GPT_SIMT_FAULT_AT=200: the kernel launched at"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("error: "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("cudaErrorIllegalAddress"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("rerun with CUDA_LAUNCH_BLOCKING=1"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("terminate called"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("did not complete"), std::string::npos) << "a hang message replaced the error: " << r.out;
}

TEST(SimtFault, ADeviceFaultEndsTheRunWithItsError) {
  ScopedEnv fault("GPT_SIMT_FAULT_AT", "200");
  for (const std::string extra : {"", "--offload params "}) {
    const CliResult r = run_gpt(kTrain + extra + "--train '" + shakespeare_byte_dir() + "/train_*.bin'");
    EXPECT_EQ(r.code, 1) << extra << r.out;
    expect_the_fault_reported(r);
  }
}

TEST(SimtFault, ADeviceFaultOnRanksEndsTheJobWithoutWaitingOutTheTimeout) {
  SKIP_WITHOUT_RANKS();
  const int timeout_s = 60;
  const auto t0 = std::chrono::steady_clock::now();
  const CliResult r = run_ranks(2, kTrain + "--train '" + shakespeare_byte_dir() + "/train_*.bin' --timeout " +
                                       std::to_string(timeout_s),
                                "phases", "GPT_SIMT_FAULT_AT=200");
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_NE(r.code, 0) << r.out;
  EXPECT_LT(took, timeout_s / 2.0) << r.out;
  expect_the_fault_reported(r);
}

}  // namespace
}  // namespace gpt::test
