// Helpers for the tests that run gpt_simt (test_simt_cli.cpp, test_simt_ranks.cpp, test_simt_device_trace.cpp,
// test_simt_hang.cpp): the model they train, its metrics file, the peak gpt memplan predicts, and runs on
// several ranks.
#pragma once
#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <vector>

#include "tests/common/json_lite.h"
#include "tests/common/test_paths.h"

namespace gpt::test {

inline const std::string kModel = "--n-layer 2 --n-head 2 --d-model 64 --seq-len 32 --tokenizer byte ";
inline const std::string kBatch = "-B 2 -T 32 ";

// Every line of a metrics file, parsed.
inline std::vector<JValue> metrics(const std::string& path) {
  std::vector<JValue> rows;
  std::istringstream in(read_log(path));
  for (std::string line; std::getline(in, line);)
    if (!line.empty() && line[0] == '{') rows.push_back(parse_json(line));
  return rows;
}

// The stream schedules (GPT_SIMT_STREAMS, tests/simt/streams.h) a run's result must not depend on, for a
// program with `streams` streams: the drawn phases, all lazy, and each stream eager in turn. Each is compared
// with "issue" (call order).
inline std::vector<std::string> schedules(int streams) {
  std::vector<std::string> s = {"phases", "lazy"};
  for (int k = 1; k <= streams; k++) s.push_back("eager:" + std::to_string(k));
  return s;
}

// The device peak gpt memplan predicts for the run (`extra`: its batch, world and sharding flags).
inline double planned_peak(const std::string& attention, const std::string& extra = kBatch) {
  const CliResult r = run_gpt("memplan " + kModel + extra + "--device cuda --attention " + attention + " --json");
  EXPECT_EQ(r.code, 0) << r.out;
  const size_t brace = r.out.rfind("\n{");
  return parse_json(r.out.substr(brace == std::string::npos ? 0 : brace + 1)).at("device_peak_bytes").num;
}

// `gpt_simt <args>` on n ranks under mpiexec with the stream schedule `schedule`: its output and exit status.
// `vars`: more variables for every rank ("GPT_SIMT_STOP_RANK=1 GPT_SIMT_STOP_AT=9").
inline CliResult run_ranks(int n, const std::string& args, const char* schedule, const std::string& vars = "") {
  std::string exports = "GPT_SIMT_DEVICES=" + std::to_string(n) + " GPT_SIMT_STREAMS=" + schedule + " " + vars;
  std::string pass;  // mpiexec -x for each
  std::istringstream in(exports);
  for (std::string kv; in >> kv;) pass += " -x " + kv.substr(0, kv.find('='));
  CliResult r;
  r.code = run_command("export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1 " + exports +
                           "; timeout 300 mpiexec -n " + std::to_string(n) + " --oversubscribe" + pass + " " +
                           gpt_binary() + " " + args,
                       &r.out);
  return r;
}

// `gpt_simt <args>` on n ranks; returns the model file it wrote to `out`.
inline std::string ranks_model(int n, const std::string& args, const char* schedule, const std::string& out) {
  const CliResult r = run_ranks(n, args + " --out " + out, schedule);
  EXPECT_EQ(r.code, 0) << args << "\n" << r.out;
  const std::string bytes = read_log(out + "/model.bin");
  EXPECT_GT(bytes.size(), 0u) << args << "\n" << r.out;
  return bytes;
}

// Whether `args` on n ranks trains the same model bytes under every schedule as in call order (the comm
// stream is the third: compute and copy come with the backend); returns those bytes. `reference_flags` go
// to the call-order run only (a metrics file).
inline std::string expect_schedule_free(int n, const std::string& args, const std::string& out,
                                 const std::string& reference_flags = "") {
  const std::string reference = ranks_model(n, args + reference_flags, "issue", out + "_issue");
  for (const std::string& schedule : schedules(3))
    EXPECT_TRUE(ranks_model(n, args, schedule.c_str(), out + "_" + schedule) == reference) << args << ": " << schedule;
  return reference;
}

// Skips unless the build has the NCCL communicator (emulated over MPI here) and mpiexec is here.
#ifdef GPT_WITH_NCCL
#define SKIP_WITHOUT_RANKS() \
  if (run_command("command -v mpiexec") != 0) GTEST_SKIP() << "mpiexec not installed"
#else
#define SKIP_WITHOUT_RANKS() GTEST_SKIP() << "this build has no NCCL communicator (it needs NCCL and MPI)"
#endif

}  // namespace gpt::test
