// Failure paths of a run directory: a full disk or an I/O error while writing a checkpoint is a clear
// error and the previous checkpoint stays complete and loadable (through the write fault hook, and on a
// real, small tmpfs where this process may mount one); a second run with the same --out is refused at once,
// naming the holder, and the lock dies with its process (kill -9 leaves nothing stale).
#include <gtest/gtest.h>
#include <sys/mount.h>

#include <chrono>
#include <filesystem>
#include <thread>

#include "tests/common/test_paths.h"

namespace gpt::test {
namespace {

const char* kTiny = " train --n-layer 2 --n-head 2 --d-model 32 --seq-len 32 --tokenizer byte -B 2 -T 32 --sample-tokens 0 --quiet";

std::string train_cmd(const std::string& out, int steps) {
  return "OMP_NUM_THREADS=1 " + gpt_binary() + kTiny + " --train '" + shakespeare_byte_dir() + "/train_*.bin' --out " + out +
         " --save-every 1 --steps " + std::to_string(steps);
}

bool complete(const std::string& ckpt) { return std::filesystem::exists(ckpt + "/manifest.txt"); }

void expect_write_error_keeps_previous(const std::string& fault, const std::string& strerror_text) {
  const std::string out = scratch_dir() + "/run";
  ASSERT_EQ(run_command(train_cmd(out, 1)), 0);
  std::string log;
  EXPECT_NE(run_command("GPT_TEST_WRITE_FAIL=" + fault + ":ckpt_00000002 " + train_cmd(out, 2) + " --resume", &log), 0);
  EXPECT_NE(log.find(strerror_text), std::string::npos) << log;
  EXPECT_NE(log.find("ckpt_00000002"), std::string::npos) << log;
  EXPECT_TRUE(complete(out + "/ckpt_00000001"));
  EXPECT_FALSE(complete(out + "/ckpt_00000002"));
  // the previous checkpoint loads: the run resumes from it once the disk is back
  EXPECT_EQ(run_command(train_cmd(out, 2) + " --resume", &log), 0) << log;
  EXPECT_NE(log.find("resumed from " + out + "/ckpt_00000001"), std::string::npos) << log;
}

TEST(ReliabilityCli, FullDiskWhileCheckpointingKeepsThePreviousCheckpoint) {
  expect_write_error_keeps_previous("ENOSPC", "No space left on device");
}

TEST(ReliabilityCli, IoErrorWhileCheckpointingKeepsThePreviousCheckpoint) {
  expect_write_error_keeps_previous("EIO", "Input/output error");
}

// Unmounts on every way out of the test; a lazy unmount cannot fail on a busy mount, so no run leaves one.
struct ScopedMount {
  std::string path;
  bool mounted = false;
  ScopedMount(const std::string& dir, const char* options) : path(dir) {
    mounted = ::mount("tmpfs", path.c_str(), "tmpfs", 0, options) == 0;
  }
  ~ScopedMount() {
    if (mounted) ::umount2(path.c_str(), MNT_DETACH);
  }
};

// A real full disk: a tmpfs with room for one checkpoint of this model (about 0.47 MB) but not two.
TEST(ReliabilityCli, RealSmallTmpfsFillsUpAndThePreviousCheckpointSurvives) {
  const std::string scratch = scratch_dir(), mnt = scratch + "/tmpfs";
  std::filesystem::create_directories(mnt);
  ScopedMount tmpfs(mnt, "size=800k");
  if (!tmpfs.mounted) GTEST_SKIP() << "cannot mount a tmpfs here";
  std::string log;
  const int rc = run_command(train_cmd(mnt + "/run", 3), &log);
  EXPECT_NE(rc, 0) << log;
  EXPECT_NE(log.find("No space left on device"), std::string::npos) << log;
  EXPECT_TRUE(complete(mnt + "/run/ckpt_00000001")) << log;
  EXPECT_FALSE(complete(mnt + "/run/ckpt_00000002")) << log;
  std::string exported;
  EXPECT_EQ(run_command(gpt_binary() + " export --from " + mnt + "/run --out " + scratch + "/m.bin", &exported), 0)
      << exported;
}

TEST(ReliabilityCli, ASecondRunOnTheSameOutIsRefusedAndKillNineLeavesNoStaleLock) {
  const std::string out = scratch_dir() + "/run";
  const std::string bg = train_cmd(out, 1000000) + " > " + out + ".log 2>&1 & echo $!";
  std::string pid_text;
  ASSERT_EQ(run_command(bg, &pid_text), 0);
  const int pid = std::atoi(pid_text.c_str());
  ASSERT_GT(pid, 0);
  // Under way once it has written a checkpoint: any, since it keeps only the latest (the first is gone by step 3).
  auto any_checkpoint = [&] {
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator(out, ec))
      if (e.path().filename().string().rfind("ckpt_", 0) == 0 && complete(e.path().string())) return true;
    return false;
  };
  for (int i = 0; i < 300 && !any_checkpoint(); i++) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  ASSERT_TRUE(any_checkpoint()) << "the first run wrote no checkpoint in 30 s";
  std::string log;
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_NE(run_command(train_cmd(out, 2), &log), 0) << log;
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 10.0);
  EXPECT_NE(log.find("--out " + out + " is in use by another run (pid " + std::to_string(pid)), std::string::npos) << log;
  run_command("kill -9 " + std::to_string(pid));  // the kernel closes its files, and drops the lock, as it dies
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  EXPECT_EQ(run_command(train_cmd(out, 1) + " --resume", &log), 0) << log;  // the lock died with its process
}

}  // namespace
}  // namespace gpt::test
