// The hang watchdog on real ranks: one of 3 training ranks is paused with SIGSTOP in the middle of a run
// (it stops without dying, as a stuck collective or a frozen host would); every rank must be gone within
// the --timeout plus 30 s, the job must end non-zero with a message naming a rank, what it waited in, the
// step and the unit, and the newest checkpoint must still be complete and loadable.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>

#include "tests/common/test_paths.h"

namespace gpt::test {
namespace {

TEST(WatchdogCli, AStoppedRankEndsTheJobWithinTheTimeout) {
  if (run_command("command -v mpiexec") != 0) GTEST_SKIP() << "no mpiexec on this machine";
  const std::string dir = scratch_dir(), gpt = gpt_binary(), data = source_dir() + "/data/tinyshakespeare";
  ASSERT_EQ(run_command(gpt + " tokenize --tokenizer byte --input " + data + "/input.txt --out " + dir + "/data"), 0);
  const int timeout_s = 5;
  // The job runs in the background; once a checkpoint is complete, the second rank is stopped and the time
  // until mpiexec returns is measured.
  const std::string script =
      "export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1; "
      "mpiexec -n 3 --oversubscribe " + gpt +
      " train --n-layer 2 --n-head 2 --d-model 32 --seq-len 32 --tokenizer byte -B 2 -T 32 --steps 1000000 "
      "--save-every 20 --sample-tokens 0 --quiet --train '" + dir + "/data/train_*.bin' --out " + dir + "/run --timeout " +
      std::to_string(timeout_s) + " > " + dir + "/job.log 2>&1 & mp=$!; "
      "for i in $(seq 1 600); do ls " + dir + "/run/ckpt_*/manifest.txt > /dev/null 2>&1 && break; sleep 0.1; done; "
      "victim=$(pgrep -P $mp | sed -n 2p); [ -n \"$victim\" ] || { echo no-rank-found; kill $mp; exit 99; }; "
      "kill -STOP $victim; t0=$(date +%s%N); wait $mp; rc=$?; t1=$(date +%s%N); kill -9 $victim 2> /dev/null; "
      "echo \"rc=$rc elapsed_ms=$(( (t1 - t0) / 1000000 ))\"";
  std::ofstream(dir + "/job.sh") << script << "\n";
  std::string out;
  run_command("timeout 300 bash " + dir + "/job.sh", &out);
  const size_t at = out.find("rc=");
  ASSERT_NE(at, std::string::npos) << out;
  const int rc = std::atoi(out.c_str() + at + 3);
  const long elapsed_ms = std::atol(out.c_str() + out.find("elapsed_ms=") + 11);
  const std::string log = read_log(dir + "/job.log");
  EXPECT_NE(rc, 0) << log;
  EXPECT_LE(elapsed_ms, (timeout_s + 30) * 1000L) << log;
  EXPECT_NE(log.find("no progress for"), std::string::npos) << log;
  EXPECT_NE(log.find("error: rank "), std::string::npos) << log;
  EXPECT_NE(log.find("(step "), std::string::npos) << log;
  std::printf("[watchdog] a stopped rank ended the 3-rank job %.1f s after SIGSTOP (--timeout %d)\n",
              elapsed_ms / 1000.0, timeout_s);
  // The newest complete checkpoint is whole: it exports (manifest, sizes and CRCs verified).
  std::string exported;
  EXPECT_EQ(run_command(gpt + " export --from " + dir + "/run --out " + dir + "/model.bin", &exported), 0) << exported;
}

}  // namespace
}  // namespace gpt::test
