// Failure modes of a real run, driven through the gpt binary: SIGTERM gives a clean checkpoint and exit 0;
// a process killed in the middle of writing a checkpoint leaves the previous one intact and resume uses
// it; kill -9 of one of 4 MPI ranks makes the whole job exit non-zero, naming the lost rank, within 30 s.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>

#include "tests/common/test_paths.h"

namespace gpt::test {
namespace {

const char* kModel = "--n-layer 2 --n-head 2 --d-model 64 --seq-len 64 --vocab 257 --tokenizer none -B 4 -T 64 ";

// Runs a bash script (written to a file, so no quoting through sh -c) under a timeout.
int run_script(const std::string& dir, const std::string& body, int timeout_s, std::string* out, const std::string& env = "") {
  const std::string path = dir + "/script.sh";
  std::ofstream(path) << "set -u\n" << body << "\n";
  return run_command(env + " timeout " + std::to_string(timeout_s) + " bash " + path, out);
}

// Synthetic byte-range token shards (no tokenizer needed).
std::string data_dir() {
  static std::string dir;
  if (dir.empty()) {
    dir = scratch_dir() + "/../fail_data";
    std::filesystem::create_directories(dir);
    const std::string txt = dir + "/text.txt";
    std::string cmd = "head -c 400000 " + source_dir() + "/data/tinyshakespeare/input.txt > " + txt + " && " +
                      gpt_binary() + " tokenize --tokenizer byte --input " + txt + " --out " + dir;
    std::string out;
    EXPECT_EQ(run_command(cmd, &out), 0) << out;
  }
  return dir + "/train_*.bin";
}

TEST(Failures, SigtermWritesACheckpointAndExitsZero) {
  const std::string dir = scratch_dir(), log = dir + "/log.txt";
  const std::string cmd = "cd " + dir + " && (OMP_NUM_THREADS=1 " + gpt_binary() + " train " + kModel +
                          "--steps 100000 --train '" + data_dir() + "' --out run > " + log +
                          " 2>&1 & pid=$!; for i in $(seq 600); do grep -q '^step ' " + log +
                          " && break; sleep 0.1; done; kill -TERM $pid; wait $pid)";
  std::string out;
  int code = run_script(dir, cmd, 120, &out);
  std::string text = out + read_log(log);
  EXPECT_EQ(code, 0) << text;
  EXPECT_NE(text.find("stop signal"), std::string::npos) << text;
  bool complete = false;
  for (auto& e : std::filesystem::directory_iterator(dir + "/run"))
    complete |= std::filesystem::exists(e.path() / "manifest.txt");
  EXPECT_TRUE(complete) << "no complete checkpoint after SIGTERM";
}

TEST(Failures, KilledDuringCheckpointKeepsThePreviousOne) {
  const std::string dir = scratch_dir();
  std::string out;
  const std::string base = "cd " + dir + " && OMP_NUM_THREADS=1 " + gpt_binary() + " train " + kModel + "--train '" +
                           data_dir() + "' --out run --save-every 1 ";
  int code = run_script(dir, base + "--steps 3", 120, &out, "GPT_TEST_KILL_IN_CHECKPOINT=2");
  EXPECT_NE(code, 0) << out;  // killed by SIGKILL while writing step 2's checkpoint
  EXPECT_TRUE(std::filesystem::exists(dir + "/run/ckpt_00000001/manifest.txt"));
  EXPECT_FALSE(std::filesystem::exists(dir + "/run/ckpt_00000002/manifest.txt"));
  code = run_script(dir, base + "--steps 3 --resume", 120, &out);
  EXPECT_EQ(code, 0) << out;
  EXPECT_NE(out.find("ckpt_00000001 at step 1"), std::string::npos) << out;
  EXPECT_NE(out.find("step     3/3"), std::string::npos) << out;
}

TEST(Failures, KillNineOfOneRankEndsTheJobWithin30Seconds) {
  if (run_command("command -v mpiexec") != 0) GTEST_SKIP() << "mpiexec not installed";
  const std::string dir = scratch_dir(), log = dir + "/log.txt";
  const std::string marker = "--seed 424242";  // finds this job's ranks
  const std::string cmd =
      "cd " + dir + " && export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1; "
      "(mpiexec -n 4 --oversubscribe " + gpt_binary() + " train " + kModel + marker + " --steps 100000 --train '" +
      data_dir() + "' > " + log + " 2>&1 & mp=$!; for i in $(seq 600); do grep -q '^step ' " + log +
      " && break; sleep 0.1; done; victim=$(pgrep -f -- 'gpt train.*" + marker + "' | grep -v $mp | tail -n 1); "
      "kill -9 $victim; t0=$(date +%s); wait $mp; rc=$?; echo elapsed=$(( $(date +%s) - t0 )) rc=$rc)";
  std::string out;
  const auto t0 = std::chrono::steady_clock::now();
  run_script(dir, cmd, 150, &out);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::string text = out + read_log(log);
  EXPECT_NE(text.find("rc="), std::string::npos) << text;
  EXPECT_EQ(text.find("rc=0"), std::string::npos) << text;
  const auto e = text.find("elapsed=");
  ASSERT_NE(e, std::string::npos) << text;
  EXPECT_LE(std::stoi(text.substr(e + 8)), 30) << text;
  EXPECT_NE(text.find("rank"), std::string::npos) << text;  // the message names the lost rank
  EXPECT_LT(secs, 150);
}

}  // namespace
}  // namespace gpt::test
