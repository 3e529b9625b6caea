// Implementation of tests/common/test_paths.h.
#include "tests/common/test_paths.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <stdexcept>

namespace gpt::test {

// Tests never read or write the user's cache of the CPU peak (src/runtime/peak_cache.h): before any test
// runs, GPT_CACHE_DIR names a path that cannot exist (/dev/null is not a directory), so every run measures
// its own peak and the gpt runs of the tests inherit that; a test that writes a cache names its own
// directory (ScopedEnv).
[[maybe_unused]] static const bool kNoUserPeakCache = ::setenv("GPT_CACHE_DIR", kNoCacheDir, 1) == 0;

ScopedEnv::ScopedEnv(const std::string& name, const std::string& value) : name_(name) {
  const char* old = std::getenv(name.c_str());
  had_ = old != nullptr;
  if (had_) old_ = old;
  ::setenv(name.c_str(), value.c_str(), 1);
}

ScopedEnv::~ScopedEnv() {
  if (had_)
    ::setenv(name_.c_str(), old_.c_str(), 1);
  else
    ::unsetenv(name_.c_str());
}

std::string source_dir() { return GPT_SOURCE_DIR; }
std::string gpt_binary() { return GPT_BINARY; }

// One root per test process, made by mkdtemp: a name that repeats across runs (a pid, in a container
// whose pids repeat and whose /tmp outlives the run) could meet what an earlier run left there.
static const std::filesystem::path& process_root() {
  static const std::filesystem::path root = [] {
    std::string pattern = (std::filesystem::temp_directory_path() / "gpt_test_XXXXXX").string();
    if (!::mkdtemp(pattern.data())) throw std::runtime_error("cannot make a scratch directory under " + pattern);
    return std::filesystem::path(pattern);
  }();
  return root;
}

std::string scratch_dir() {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  std::string name = info ? std::string(info->test_suite_name()) + "." + info->name() : "scratch";
  for (auto& ch : name)
    if (ch == '/') ch = '_';
  auto dir = process_root() / name;
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir.string();
}

std::string shared_scratch_dir(const std::string& name) {
  const auto dir = process_root() / ("shared." + name);
  std::filesystem::create_directories(dir);
  return dir.string();
}

std::string shakespeare_byte_dir() {
  static const std::string dir = [] {
    const std::string d = shared_scratch_dir("shakespeare_byte");
    const CliResult r =
        run_gpt("tokenize --tokenizer byte --input " + source_dir() + "/data/tinyshakespeare/input.txt --out " + d);
    EXPECT_EQ(r.code, 0) << r.out;
    return d;
  }();
  return dir;
}

int run_command(const std::string& cmd, std::string* output) {
  std::string full = cmd + " 2>&1";
  FILE* p = popen(full.c_str(), "r");
  if (!p) return -1;
  char buf[4096];
  std::string out;
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  int status = pclose(p);
  if (output) *output = out;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

CliResult run_gpt(const std::string& args) {
  CliResult r;
  r.code = run_command("OMP_NUM_THREADS=1 timeout 120 " + gpt_binary() + " " + args, &r.out);
  return r;
}

void expect_gpt_error(const std::string& args, const std::string& needle) {
  const CliResult r = run_gpt(args);
  EXPECT_NE(r.code, 0) << args << "\n" << r.out;
  EXPECT_LT(r.code, 128) << "crashed (signal): " << args << "\n" << r.out;
  size_t lines = 0;
  for (char c : r.out) lines += c == '\n';
  EXPECT_EQ(lines, 1u) << args << "\n" << r.out;
  EXPECT_EQ(r.out.rfind("error: ", 0), 0u) << r.out;
  EXPECT_NE(r.out.find(needle), std::string::npos) << "expected '" << needle << "' in: " << r.out;
}

std::string slurp(const std::string& path) {
  FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) return "";
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) out.append(buf, n);
  std::fclose(f);
  return out;
}

void spit(const std::string& path, const std::string& bytes) {
  FILE* f = std::fopen(path.c_str(), "wb");
  ASSERT_NE(f, nullptr) << "cannot write " << path;
  EXPECT_EQ(std::fwrite(bytes.data(), 1, bytes.size(), f), bytes.size()) << path;
  std::fclose(f);
}

}  // namespace gpt::test
