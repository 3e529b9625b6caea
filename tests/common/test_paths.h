// Paths the tests need: the source tree (fixtures, data) and the built gpt binary, plus a per-test
// scratch directory that is created fresh.
#pragma once
#include <string>

namespace gpt::test {
// The GPT_CACHE_DIR every test process starts with: no cache can be read or written there.
constexpr const char* kNoCacheDir = "/dev/null/gpt-tests-name-their-own-cache-dir";
// Sets an environment variable (seen by this process and the gpt runs it starts) until the end of scope.
class ScopedEnv {
 public:
  ScopedEnv(const std::string& name, const std::string& value);
  ~ScopedEnv();
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  std::string name_, old_;
  bool had_ = false;
};
std::string source_dir();
std::string gpt_binary();
// A fresh, empty directory under this process's scratch root, unique to the calling test; each call
// empties it again.
std::string scratch_dir();
// A directory under the same root, named by the caller, for what several calls share (tokenized data):
// made once, never emptied by scratch_dir().
std::string shared_scratch_dir(const std::string& name);
// Tiny Shakespeare as byte-level shards (train_*.bin, val_*.bin), tokenized by gpt once per test process.
std::string shakespeare_byte_dir();
// Runs a shell command, returns its exit status and (optionally) its combined stdout+stderr.
int run_command(const std::string& cmd, std::string* output = nullptr);
// The gpt binary run with `args` (one OpenMP thread, 120 s at most): its exit status and combined output.
struct CliResult {
  int code;
  std::string out;
};
CliResult run_gpt(const std::string& args);
// Expects a non-zero exit (not a signal) whose output is one "error:" line mentioning `needle`.
void expect_gpt_error(const std::string& args, const std::string& needle);
// Contents of a file, or "" when it does not exist (read by the tests themselves, not by the program's reader).
std::string slurp(const std::string& path);
// Writes `bytes` to a file, replacing it: fixtures the tests make by hand, damaged ones included.
void spit(const std::string& path, const std::string& bytes);
// Contents of a log file, or "" when it does not exist.
inline std::string read_log(const std::string& path) { return slurp(path); }
}  // namespace gpt::test
