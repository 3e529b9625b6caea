// Paths the tests need: the source tree (fixtures, data) and the built gpt binary, plus a per-test
// scratch directory that is created fresh.
#pragma once
#include <string>

namespace gpt::test {
std::string source_dir();
std::string gpt_binary();
// A fresh, empty directory under the build tree, unique to the calling test.
std::string scratch_dir();
// Runs a shell command, returns its exit status and (optionally) its combined stdout+stderr.
int run_command(const std::string& cmd, std::string* output = nullptr);
// Contents of a log file, or "" when it does not exist.
std::string read_log(const std::string& path);
}  // namespace gpt::test
