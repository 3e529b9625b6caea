// The peak for MFU as a user meets it in `gpt bench`: MFU never reads above 100% (a step faster than the
// peak is the peak, said in one line), `gpt bench --calibrate` caches the peak in GPT_CACHE_DIR and later
// runs use it, a corrupt cache is one error line naming the file, and calibrating again replaces it.
#include <gtest/gtest.h>

#include <fstream>

#include "src/io/atomic_file.h"
#include "tests/common/json_lite.h"
#include "tests/common/test_paths.h"

namespace gpt::test {
namespace {

const std::string kBench = "bench --n-layer 1 --n-head 2 --d-model 32 --seq-len 16 --vocab 256 -B 1 -T 16 --steps 2 --json --quiet";

JValue last_json(const std::string& out) { return JsonParser(out.substr(out.rfind('{'))).parse(); }

size_t count(const std::string& s, const std::string& needle) {
  size_t n = 0;
  for (size_t at = s.find(needle); at != std::string::npos; at = s.find(needle, at + 1)) n++;
  return n;
}

// A stated peak of 1 kFLOP/s is beaten by every step: the first step's rate is the peak, in one line, and
// the MFU printed is at most 1.
TEST(PeakCli, MfuNeverReadsAbove100Percent) {
  const CliResult r = run_gpt(kBench + " --peak-tflops 1e-9");
  ASSERT_EQ(r.code, 0) << r.out;
  const JValue j = last_json(r.out);
  EXPECT_LE(j.at("mfu").num, 1.0) << r.out;
  EXPECT_GT(j.at("mfu").num, 0.0) << r.out;
  EXPECT_GT(j.at("peak_tflops_per_rank").num, 1e-9);
  EXPECT_EQ(j.at("peak_source").str.rfind("the fastest training step of this run", 0), 0u) << r.out;
  EXPECT_EQ(count(r.out, "MFU: a step ran at"), 1u) << r.out;
  EXPECT_NE(r.out.find("above the peak 1e-09 TFLOP/s (--peak-tflops)"), std::string::npos) << r.out;
}

TEST(PeakCli, CalibrationIsCachedAndUsed) {
  const std::string dir = scratch_dir();
  ScopedEnv cache("GPT_CACHE_DIR", dir + "/cache");
  const std::string file = dir + "/cache/cpu_peak.json";
  CliResult r = run_gpt("bench --calibrate --quick --out " + dir + "/hw.json");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("cached in " + file), std::string::npos) << r.out;
  const JValue c = JsonParser(read_file(file)).parse();
  ASSERT_EQ(c.at("entries").arr.size(), 1u);
  const JValue& e = c.at("entries").arr[0];
  EXPECT_EQ(e.at("threads").num, 1);  // run_gpt gives gpt one OpenMP thread
  EXPECT_GT(e.at("peak_flops").num, 0);

  r = run_gpt(kBench);
  ASSERT_EQ(r.code, 0) << r.out;
  JValue j = last_json(r.out);
  EXPECT_NE(j.at("peak_source").str.find("cached in " + file), std::string::npos) << r.out;
  EXPECT_LE(j.at("mfu").num, 1.0);
  if (count(r.out, "MFU: a step ran at") == 0) {  // else a step beat the calibration and is the peak
    const double cached = e.at("peak_flops").num;  // printed with 6 significant digits: within 5e-6
    EXPECT_NEAR(j.at("peak_tflops_per_rank").num * 1e12, cached, 5e-6 * cached);
  }

  // Two threads are another key: the one-thread calibration is not used.
  r.code = run_command("OMP_NUM_THREADS=2 OPENBLAS_NUM_THREADS=2 timeout 120 " + gpt_binary() + " " + kBench, &r.out);
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_EQ(last_json(r.out).at("peak_source").str.find("cached in"), std::string::npos) << r.out;

  std::ofstream(file) << "{\"format\": \"gpt cpu peak cache\", \"version\": 1, \"entries\": [{\"cpu\": 1}]}";
  expect_gpt_error(kBench, file);
  r = run_gpt(kBench);
  EXPECT_NE(r.out.find("rerun gpt bench --calibrate"), std::string::npos) << r.out;
  r = run_gpt("bench --calibrate --quick --out " + dir + "/hw.json");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("warning: replacing a CPU peak cache that is not valid: " + file), std::string::npos) << r.out;
  r = run_gpt(kBench);
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(last_json(r.out).at("peak_source").str.find("cached in " + file), std::string::npos) << r.out;
}

TEST(PeakCli, HelpSaysWhereThePeakComesFrom) {
  const CliResult r = run_gpt("bench --help");
  ASSERT_EQ(r.code, 0) << r.out;
  for (const char* s : {"$GPT_CACHE_DIR", "$XDG_CACHE_HOME/gpt", "~/.cache/gpt", "cpu_peak.json", "never reads above 100%"})
    EXPECT_NE(r.out.find(s), std::string::npos) << s << "\n" << r.out;
}

}  // namespace
}  // namespace gpt::test
