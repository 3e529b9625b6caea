// A rank that stops in the middle of a step leaves its peers with a collective that never completes. On GPU
// ranks nothing blocks the host at the collective itself (the compute stream waits for it), so the peer finds
// out where it next waits for the device: that wait polls, and after --timeout it names the collective and its
// unit, aborts the communicators and ends the rank, and mpiexec then ends the job. On the emulated machine the
// stopped rank is GPT_SIMT_STOP_RANK (tests/simt/nccl.cpp: it SIGSTOPs itself as its n-th collective starts).
#include <gtest/gtest.h>

#include <chrono>
#include <regex>
#include <string>

#include "tests/common/test_paths.h"
#include "tests/simt/test/simt_cli.h"

namespace gpt::test {
namespace {

TEST(SimtHang, AStoppedRankEndsTheJobWithTheCollectiveNamed) {
  SKIP_WITHOUT_RANKS();
  const int timeout_s = 10;
  const auto t0 = std::chrono::steady_clock::now();
  // Collective 12 on rank 1 falls in the second step (one step of this model issues 8 on each rank).
  const std::string args = "train " + kModel + "-T 32 -B 2 --sample-tokens 0 --steps 4 --train '" +
                           shakespeare_byte_dir() + "/train_*.bin' --device cuda --attention fused --timeout " +
                           std::to_string(timeout_s);
  const CliResult r = run_ranks(2, args, "phases", "GPT_SIMT_STOP_RANK=1 GPT_SIMT_STOP_AT=12");
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_NE(r.code, 0) << r.out;
  EXPECT_LE(took, timeout_s + 30.0) << r.out;
  const std::regex message(
      "error: rank 0: the (all-gather|reduce-scatter|all-reduce) of (embed|block[0-9]+) \\(2 ranks\\) did not "
      "complete in [0-9]+ s \\(--timeout 10\\), waited for in [a-z -]+ \\(step [0-9]+, unit [a-z0-9]+\\)");
  EXPECT_TRUE(std::regex_search(r.out, message)) << r.out;
  std::printf("[hang] the job ended after %.1f s (--timeout %d)\n", took, timeout_s);
}

}  // namespace
}  // namespace gpt::test
