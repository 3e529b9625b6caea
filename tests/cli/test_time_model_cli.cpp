// `gpt memplan --time`, `--sweep` and `gpt bench --calibrate` as a user meets them: the reports parse, a
// quick calibration writes a file the time model reads back, and mistakes are one "error:" line naming the
// flag or the file and field.
#include <gtest/gtest.h>

#include <fstream>

#include "src/io/atomic_file.h"
#include "tests/common/json_lite.h"
#include "tests/common/test_paths.h"

namespace gpt::test {
namespace {

std::string hw(const std::string& name) { return source_dir() + "/data/hardware/" + name; }

TEST(TimeModelCli, MemplanTimeJsonOnTheH200File) {
  CliResult r = run_gpt("memplan --config d12 -B 16 -T 1024 --device cuda --attention fused --world 8 --time --hardware " +
                 hw("h200.json") + " --json");
  ASSERT_EQ(r.code, 0) << r.out;
  JValue j = JsonParser(r.out).parse();
  const JValue& t = j.at("time");
  EXPECT_GT(t.at("step_ms").num, 0);
  EXPECT_GT(t.at("tokens_per_s").num, 0);
  EXPECT_GT(t.at("mfu").num, 0);
  EXPECT_LT(t.at("mfu").num, 1);
  EXPECT_GT(t.at("bytes").at("all_gather").num, 0);
  EXPECT_EQ(t.at("units").arr.size(), 13u);  // the root (embeddings and final layernorm), 12 blocks
  EXPECT_GT(j.at("device_peak_bytes").num, 0);  // the memory plan is still there
  // --wrap blocks:4: the root and 3 units of 4 blocks
  CliResult w = run_gpt("memplan --config d12 -B 16 -T 1024 --device cuda --attention fused --world 8 --time --hardware " +
                        hw("h200.json") + " --json --wrap blocks:4");
  ASSERT_EQ(w.code, 0) << w.out;
  const JValue jw = JsonParser(w.out).parse();
  EXPECT_EQ(jw.at("time").at("units").arr.size(), 4u);
  EXPECT_EQ(jw.at("wrap").str, "blocks:4");
}

TEST(TimeModelCli, MemplanTimeTableAndSweep) {
  CliResult r = run_gpt("memplan --config d6 --world 4 --shard grad_op --total-batch 2048 --time --hardware " + hw("h100.json") +
                 " --device cuda");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("predicted step time on NVIDIA H100"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("(2 micro-steps)"), std::string::npos) << r.out;
  r = run_gpt("memplan --config d12 -B 8 -T 1024 --device cuda --sweep --sweep-world 1,8,16 --hardware " + hw("a100_80gb.json"));
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("weak scaling"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("hybrid"), std::string::npos) << r.out;
  r = run_gpt("memplan --config d12 -B 8 -T 1024 --device cuda --sweep --sweep-world 1,2,4 --sweep-scaling strong --json "
          "--hardware " + hw("a100_80gb.json"));
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("\"world\": 4, \"shard\": \"full\", \"group\": 4, \"B\": 2"), std::string::npos) << r.out;
}

TEST(TimeModelCli, CalibrateWritesAFileTheModelReads) {
  const std::string dir = scratch_dir(), f = dir + "/hw.json";
  ScopedEnv cache("GPT_CACHE_DIR", dir + "/cache");  // it caches the peak for MFU too
  CliResult r = run_gpt("bench --calibrate --quick --out " + f);
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("wrote " + f), std::string::npos) << r.out;
  r = run_gpt("memplan --config d2 --time --hardware " + f + " --json");
  ASSERT_EQ(r.code, 0) << r.out;
  JValue j = JsonParser(r.out).parse();
  EXPECT_GT(j.at("time").at("step_ms").num, 0);
  // a second calibration updates the same file (its profile replaced, not duplicated)
  r = run_gpt("bench --calibrate --quick --out " + f);
  ASSERT_EQ(r.code, 0) << r.out;
  JValue h = JsonParser(read_file(f)).parse();
  EXPECT_EQ(h.at("profiles").arr.size(), 1u);
  EXPECT_EQ(h.at("sources").arr.size(), 2u);
}

TEST(TimeModelCli, MistakesAreOneLine) {
  expect_gpt_error("memplan --config d2 --time", "--hardware FILE");
  expect_gpt_error("memplan --config d2 --time --hardware /nonexistent.json", "--hardware /nonexistent.json");
  expect_gpt_error("memplan --config d2 --time --hardware " + hw("h200.json"), "use a matching hardware file");
  expect_gpt_error("memplan --config d2 --time --hardware " + hw("h200.json") + " --device cuda --total-batch 100",
               "--total-batch 100 must be a multiple");
  expect_gpt_error("memplan --config d2 --sweep --sweep-world 1,x --hardware " + hw("h200.json"), "--sweep-world");
  expect_gpt_error("memplan --config d2 --sweep --sweep-scaling sideways --hardware " + hw("h200.json"), "--sweep-scaling");
  expect_gpt_error("bench --calibrate", "--out FILE");
  const std::string bad = scratch_dir() + "/bad.json";
  {
    std::ofstream o(bad);
    o << R"({"name": "x", "kind": "gpu", "peak_flops": 1e14, "profiles": [{"gemm": 1e13, "stream": 1e12}],)"
      << R"( "host": {"bandwidth": 1e11, "pcie": 1e10}, "network": {"intra": {"bandwidth": -5}}})";
  }
  expect_gpt_error("memplan --config d2 --device cuda --time --hardware " + bad, "field network.intra.bandwidth");
}

}  // namespace
}  // namespace gpt::test
