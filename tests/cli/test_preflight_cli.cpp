// Pre-flight under a real memory limit: a run that cannot fit is refused within seconds, before it
// allocates, with the need, the availability and a lever; the same run with that lever then trains under
// the same limit. The limit is the address-space rlimit (ulimit -v), which works for any user on any
// Linux; where this process may create a memory cgroup (root with cgroup v1 or v2 writable), the same
// is shown under a cgroup limit too.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>

#include "tests/common/test_paths.h"

namespace gpt::test {
namespace {

// 8 layers of 16 heads over 64 channels, a byte vocabulary, at B=16, T=512: the plan is about 2.3 GiB per rank,
// 0.4 GiB with recompute selective (gpt memplan), so a limit near 1.9 GiB of address space refuses the
// baseline and admits a recompute lever. Narrow, so that its attention's probabilities hold the memory while
// the step stays short (d6, of the same plan, took 16 s a step here; this takes 8).
const char* kRun = " bench --n-layer 8 --n-head 16 --d-model 64 --vocab 257 --tokenizer none --seq-len 512 -T 512 --steps 1";
const char* kBatch = "-B 16";  // the micro-batch, which a lever may replace (-B 8 --total-batch ...)

struct Outcome {
  int code;
  std::string out;
  double seconds;
};

// The run with a lever's flags: they replace the run's own (a lever that lowers -B gives its own -B).
std::string with_lever(const std::string& lever) {
  return lever.find("-B ") == std::string::npos ? std::string(kBatch) + " " + lever : lever;
}

Outcome run_limited(const std::string& limit_prefix, const std::string& extra) {
  const auto t0 = std::chrono::steady_clock::now();
  Outcome o;
  o.code = run_command("OMP_NUM_THREADS=1 timeout 300 sh -c '" + limit_prefix + " exec " + gpt_binary() + kRun + " " +
                           with_lever(extra) + "'",
                       &o.out);
  o.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return o;
}

// The lever named by the refusal: "cheapest lever that fits: FLAGS (needs ...)".
std::string lever_of(const std::string& msg) {
  const std::string key = "cheapest lever that fits: ";
  const size_t a = msg.find(key);
  if (a == std::string::npos) return "";
  const size_t b = msg.find(" (needs", a);
  return msg.substr(a + key.size(), b - a - key.size());
}

void expect_refused_then_lever_fits(const std::string& limit_prefix, const std::string& limit_name) {
  const Outcome refused = run_limited(limit_prefix, "");
  EXPECT_NE(refused.code, 0) << refused.out;
  EXPECT_LT(refused.seconds, 10.0) << refused.out;
  EXPECT_NE(refused.out.find("error: bench: this run does not fit in memory"), std::string::npos) << refused.out;
  EXPECT_NE(refused.out.find(limit_name), std::string::npos) << refused.out;
  const std::string lever = lever_of(refused.out);
  ASSERT_NE(lever.find("--recompute"), std::string::npos) << refused.out;
  const Outcome fits = run_limited(limit_prefix, lever);
  EXPECT_EQ(fits.code, 0) << lever << "\n" << fits.out;
  EXPECT_NE(fits.out.find("ms_per_step"), std::string::npos) << fits.out;
}

TEST(PreflightCli, AddressSpaceLimitRefusesThenTheLeverTrains) {
  expect_refused_then_lever_fits("ulimit -v 2000000;", "the address-space limit (ulimit -v)");
}

// Past the check (--no-preflight), an allocation that fails in the run is one line naming the ledger category
// and the bytes asked for.
TEST(PreflightCli, AnAllocationFailureNamesTheCategoryAndTheBytes) {
  const Outcome o = run_limited("ulimit -v 1500000;", "--no-preflight");
  EXPECT_NE(o.code, 0) << o.out;
  EXPECT_NE(o.out.find("error: cpu: out of memory allocating "), std::string::npos) << o.out;
  EXPECT_NE(o.out.find(" bytes for "), std::string::npos) << o.out;
}

// A cgroup of our own under this process's memory cgroup (v1 here; v2 where that is the hierarchy).
std::string make_memory_cgroup(int64_t limit) {
  std::ifstream in("/proc/self/cgroup");
  std::string line;
  while (std::getline(in, line)) {
    const size_t a = line.find(':'), b = line.find(':', a + 1);
    const std::string ctrl = line.substr(a + 1, b - a - 1), path = line.substr(b + 1);
    const bool v1 = ctrl == "memory";
    const std::string base = v1 ? "/sys/fs/cgroup/memory" + path : "/sys/fs/cgroup" + path;
    if (!v1 && !(ctrl.empty() && std::filesystem::exists(base + "/cgroup.controllers"))) continue;
    const std::string dir = base + "/gpt_preflight_test_" + std::to_string(::getpid());
    std::error_code ec;
    std::filesystem::remove(dir, ec);  // one an earlier run with this pid left (rmdir of an empty cgroup)
    if (!std::filesystem::create_directory(dir, ec)) continue;
    std::ofstream(dir + (v1 ? "/memory.limit_in_bytes" : "/memory.max")) << limit;
    return dir;
  }
  return "";
}

TEST(PreflightCli, CgroupLimitRefusesThenTheLeverTrains) {
  const std::string dir = make_memory_cgroup(int64_t{1900} << 20);
  if (dir.empty()) GTEST_SKIP() << "no memory cgroup can be created here (needs root and a writable cgroup fs)";
  expect_refused_then_lever_fits("echo $$ > " + dir + "/cgroup.procs;", "cgroup");
  std::filesystem::remove(dir);
}

}  // namespace
}  // namespace gpt::test
