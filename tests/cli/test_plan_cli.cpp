// `gpt plan` and `--plan auto` as a user meets them: the report parses and its first choice runs, explicit
// flags are kept, the calibration cache serves --plan auto on the cpu, and every mistake is one "error:" line
// naming the flag or the file.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>

#include "src/cli/plan_auto.h"
#include "src/core/check.h"
#include "tests/common/json_lite.h"
#include "tests/common/test_paths.h"

namespace gpt::test {
namespace {

std::string hw(const std::string& name) { return source_dir() + "/data/hardware/" + name; }

void expect_one_error_line(const CliResult& r, const std::string& part) {
  EXPECT_NE(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("error: "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(part), std::string::npos) << r.out;
  const size_t at = r.out.find("error: ");
  if (at != std::string::npos) {
    EXPECT_EQ(r.out.find('\n', at), r.out.size() - 1) << r.out;
  }
}

TEST(PlanCli, JsonReportOnTheA100File) {
  CliResult r = run_gpt("plan --config d12 --world 8 -T 1024 --total-batch 524288 --hardware " + hw("a100_80gb.json") +
                        " --attention fused --top 4 --json");
  ASSERT_EQ(r.code, 0) << r.out;
  const JValue j = JsonParser(r.out).parse();
  ASSERT_EQ(j.at("top").arr.size(), 4u);
  double prev = 0;
  for (const JValue& c : j.at("top").arr) {
    EXPECT_GE(c.at("step_s").num, prev);
    prev = c.at("step_s").num;
    EXPECT_LE(c.at("device_need_bytes").num, j.at("budget_device_bytes").num);
    EXPECT_NE(c.at("flags").str.find("--total-batch 524288"), std::string::npos);
    EXPECT_GT(c.at("mfu").num, 0);
    EXPECT_LT(c.at("mfu").num, 1);
  }
  const JValue& s = j.at("stats");
  EXPECT_EQ(s.at("space").num, s.at("no_fit").num + s.at("dominated").num + s.at("bounded").num + s.at("priced").num);
  EXPECT_NE(j.at("why").str.find("#2 is"), std::string::npos);
}

// The note on the top's spread states the gap between #1 and the last row as the table prints them.
TEST(PlanCli, TheTopsSpreadIsStated) {
  const std::string args = "plan --config d6 --world 4 -T 256 --total-batch 8192 --hardware " + hw("h100.json") + " --top 5";
  CliResult text = run_gpt(args), json = run_gpt(args + " --json");
  ASSERT_EQ(text.code, 0) << text.out;
  ASSERT_EQ(json.code, 0) << json.out;
  const JValue report = JsonParser(json.out).parse();
  const JValue& top = report.at("top");
  ASSERT_EQ(top.arr.size(), 5u);
  const double first = top.arr.front().at("tokens_per_s").num, last = top.arr.back().at("tokens_per_s").num;
  char pct[32];
  std::snprintf(pct, sizeof pct, "%.1f%%", 100 * (first - last) / first);
  EXPECT_NE(text.out.find(std::string("note: the top 5 are predicted within ") + pct + " of #1"), std::string::npos)
      << text.out;
  EXPECT_EQ(run_gpt(args.substr(0, args.size() - 1) + "2").out.find("are predicted within"), std::string::npos);
}

TEST(PlanCli, PinsAreKeptAndTheTableNamesThem) {
  CliResult r = run_gpt("plan --config d6 --world 4 -T 256 --total-batch 8192 --hardware " + hw("h100.json") +
                        " --shard hybrid --shard-group 2 --recompute selective -B 2");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("--shard hybrid --shard-group 2 --recompute selective"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(" -B 2 -T 256 --total-batch 8192"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("--shard full"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("searched "), std::string::npos) << r.out;
}

TEST(PlanCli, BadInputIsOneLine) {
  const std::string base = "plan --config d6 --world 4 -T 256 ";
  expect_one_error_line(run_gpt(base + "--total-batch 8192 --hardware /nonexistent/hw.json"), "--hardware /nonexistent/hw.json");
  expect_one_error_line(run_gpt(base + "--total-batch 1000 --hardware " + hw("h100.json")),
                        "--total-batch 1000: must be a positive multiple of T x world = 256 x 4");
  expect_one_error_line(run_gpt(base + "--total-batch 8192 --hardware " + hw("h100.json") + " --budget 100MiB"),
                        "nothing fits the budget (100.00 MiB device");
  expect_one_error_line(run_gpt(base + "--hardware " + hw("h100.json")), "--total-batch");
  expect_one_error_line(run_gpt(base + "--total-batch 8192 --hardware " + hw("h100.json") + " --budget 1GiB,x"), "--budget");
  expect_one_error_line(run_gpt("bench --config d2 --plan fast --steps 1"), "--plan: expected auto");
  expect_one_error_line(run_gpt("bench --config d2 --hardware " + hw("h100.json") + " --steps 1"),
                        "--hardware is read only with --plan auto");
  expect_one_error_line(run_gpt("bench --config d2 --device cpu --plan auto --hardware " + hw("h100.json") + " --steps 1"),
                        "describes a gpu but this run is on cpu");
}

// 1024 ranks cannot each take a sequence of a 512-sequence batch: the plan reaches them through T (d36 has 20
// heads: T in {2, 4} inside a node of 8).
TEST(PlanCli, AWorldLargerThanTheBatchPlansTensorParallelism) {
  CliResult r = run_gpt("plan --config d36 --world 1024 --total-batch 524288 -T 1024 --hardware " + hw("h100.json") +
                        " --json");
  ASSERT_EQ(r.code, 0) << r.out;
  const JValue j = JsonParser(r.out).parse();
  for (const JValue& c : j.at("top").arr) {
    EXPECT_GE(c.at("tp").num, 2) << c.at("flags").str;
    EXPECT_EQ(c.at("flags").str.rfind("--tp " + std::to_string((int)c.at("tp").num) + " ", 0), 0u) << c.at("flags").str;
    EXPECT_EQ(c.at("dp").num * c.at("tp").num, 1024);
  }
  std::vector<int> searched;
  for (const JValue& t : j.at("tp_searched").arr) searched.push_back((int)t.num);
  EXPECT_EQ(searched, (std::vector<int>{2, 4}));  // T = 1 gives 1024 ranks 512 sequences
}

// A plan that keeps T = 1 shows each other T's fastest (exact with --per-tp) below the top, with why it is slower
// than #1; d36 at 64 ranks keeps T = 1, and says why not 2 or 4.
TEST(PlanCli, WhyNotTensorParallelismIsShown) {
  // --per-tp prices each size to its exact fastest: on d12 at 16 ranks (seconds; d36 at 64 takes most of a minute)
  CliResult r = run_gpt("plan --config d12 --world 16 --total-batch 131072 -T 1024 --hardware " + hw("h100.json") +
                        " --top 3 --per-tp --json");
  ASSERT_EQ(r.code, 0) << r.out;
  const JValue j = JsonParser(r.out).parse();
  const JValue& first = j.at("top").arr.at(0);
  const JValue& others = j.at("other_tp");
  ASSERT_EQ(others.arr.size(), 2u) << r.out;  // the two sizes #1 does not use, of 1, 2 and 4
  for (const JValue& o : others.arr) {
    EXPECT_NE(o.at("tp").num, first.at("tp").num);
    EXPECT_TRUE(o.at("exact").b);
    const JValue& f = o.at("fastest");
    EXPECT_EQ(f.at("tp").num, o.at("tp").num);
    EXPECT_GT(f.at("step_s").num, j.at("top").arr.back().at("step_s").num);  // not in the top 3
    const std::string why = o.at("why").str;
    EXPECT_EQ(why.find("--tp " + std::to_string((int)o.at("tp").num) + "'s fastest is "), 0u) << why;
    if (first.at("tp").num == 1) {
      EXPECT_NE(why.find("slower than #1: exposed comm"), std::string::npos) << why;
    }
  }
  // d36 at 64 ranks without --per-tp: every TP candidate is bounded out, and the report says by how much
  CliResult text = run_gpt("plan --config d36 --world 64 --total-batch 524288 -T 1024 --hardware " + hw("h100.json") +
                           " --top 3");
  ASSERT_EQ(text.code, 0) << text.out;
  EXPECT_NE(text.out.find("meshes searched: --tp 1, 2 or 4 (world 64"), std::string::npos) << text.out;
  for (const char* tp : {"2", "4"})  // T = 1 is #1 there: each other size's least bound is above #3's step
    EXPECT_NE(text.out.find(std::string("why not --tp ") + tp + ": none of its "), std::string::npos) << text.out;
}

TEST(PlanCli, TpPinsAreKeptAndBadOnesAreOneLine) {
  const std::string base = "plan --config d6 -T 256 --total-batch 8192 --hardware " + hw("h100.json");
  CliResult r = run_gpt(base + " --world 4 --tp 2 --sequence-parallel off --json");
  ASSERT_EQ(r.code, 0) << r.out;
  const JValue pinned = JsonParser(r.out).parse();
  for (const JValue& c : pinned.at("top").arr) {
    EXPECT_EQ(c.at("flags").str.rfind("--tp 2 --sequence-parallel off --shard ", 0), 0u) << c.at("flags").str;
    EXPECT_FALSE(c.at("sequence_parallel").b);
  }
  CliResult on = run_gpt(base + " --world 4 --sequence-parallel on --json");
  ASSERT_EQ(on.code, 0) << on.out;
  const JValue sp_on = JsonParser(on.out).parse();
  for (const JValue& c : sp_on.at("top").arr) EXPECT_TRUE(c.at("sequence_parallel").b);
  expect_one_error_line(run_gpt(base + " --world 4 --tp 3"), "--tp 3 must divide --world 4");
  expect_one_error_line(run_gpt(base + " --world 8 --tp 4"), "--tp 4 must divide the model's 6 heads");
  expect_one_error_line(run_gpt(base + " --world 4 --tp 1 --sequence-parallel on"), "--sequence-parallel on needs --tp > 1");
  // no mesh reaches 1024 ranks with 512 sequences when no T > 1 splits the model (d48: 25 heads)
  expect_one_error_line(run_gpt("plan --config d48 --world 1024 --total-batch 524288 -T 1024 --hardware " +
                                hw("a100_80gb.json")),
                        "--total-batch 524288: must be a positive multiple of T x world = 1024 x 1024 = 1048576 "
                        "(every data-parallel rank takes whole sequences); no --tp > 1 divides the model's 25 heads");
}

CliResult ranks(int n, const std::string& args) {
  CliResult r;
  r.code = run_command("export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1 "
                       "OPENBLAS_NUM_THREADS=1; timeout 300 mpiexec -n " + std::to_string(n) + " --oversubscribe " +
                           gpt_binary() + " " + args,
                       &r.out);
  return r;
}

// gpt train --plan auto on 2 cpu ranks (a hardware file given): one sequence a step is reached only with --tp 2,
// which the run then uses (its start-up line names the mesh); a given --tp and --sequence-parallel are kept.
TEST(PlanCli, PlanAutoChoosesAndKeepsTp) {
  if (run_command("command -v mpiexec") != 0) GTEST_SKIP() << "mpiexec not installed";
  const std::string file = scratch_dir() + "/cpu2.json";
  std::ofstream(file) << R"({"name": "plan test cpu", "kind": "cpu", "dtype": "fp32", "peak_flops": 1e11, "cores": 2,
    "profiles": [{"ranks": 2, "threads": 1, "gemm": [[1e4, 2e9], [1e8, 2.5e10]], "stream": 2e10, "copy": 1e10}],
    "host": {"bandwidth": 2e10, "pcie": 1e10},
    "network": {"overlap": false, "devices_per_node": 2, "intra": {"bandwidth": 5e9, "latency_s": 2e-5},
                "inter": {"bandwidth_per_node": 5e9, "latency_s": 2e-5}}})";
  const std::string bench = "train --n-layer 2 --n-head 4 --d-model 64 --seq-len 32 -T 32 --total-batch 32 --steps 1 "
                            "--sample-tokens 0 --device cpu --train '" + shakespeare_byte_dir() + "/train_*.bin' "
                            "--plan auto --hardware " + file;
  CliResult r = ranks(2, bench);
  ASSERT_EQ(r.code, 0) << r.out;
  const size_t at = r.out.find("--plan auto: --tp 2 ");
  ASSERT_NE(at, std::string::npos) << r.out;
  const std::string line = r.out.substr(at, r.out.find('\n', at) - at);
  const bool sp = line.find("--sequence-parallel off") == std::string::npos;
  EXPECT_NE(r.out.find(sp ? "| tp 2 (sequence parallel) x dp 1 |" : "| tp 2 x dp 1 |"), std::string::npos) << r.out;
  CliResult pinned = ranks(2, bench + " --tp 2 --sequence-parallel off --recompute selective");
  ASSERT_EQ(pinned.code, 0) << pinned.out;
  EXPECT_NE(pinned.out.find("--plan auto: --tp 2 --sequence-parallel off --shard full --recompute selective"),
            std::string::npos)
      << pinned.out;
  EXPECT_NE(pinned.out.find("| tp 2 x dp 1 |"), std::string::npos) << pinned.out;
  // a given --tp the world cannot hold is checked as a run would check it
  expect_one_error_line(run_gpt(bench + " --tp 2"), "--tp 2 is larger than the world size 1");
}

// --plan auto on the cpu: the cached calibration (here a quick one, made first) serves the run without a new
// measurement; the chosen -B and the pins show in the run's own report.
TEST(PlanCli, PlanAutoRunsFromTheCachedCalibration) {
  const std::string dir = scratch_dir();
  ScopedEnv cache("GPT_CACHE_DIR", dir);
  ScopedEnv threads("OMP_NUM_THREADS", "1");
  ASSERT_EQ(run_gpt("bench --calibrate --quick --out " + dir + "/cpu_hardware.json").code, 0);
  CliResult r = run_gpt("bench --config d2 --vocab 257 -T 64 --total-batch 512 --steps 1 --device cpu --plan auto "
                        "--recompute selective");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_EQ(r.out.find("calibrating"), std::string::npos) << r.out;
  const size_t at = r.out.find("--plan auto: --shard ");
  ASSERT_NE(at, std::string::npos) << r.out;
  const std::string line = r.out.substr(at, r.out.find('\n', at) - at);
  EXPECT_NE(line.find("--recompute selective"), std::string::npos) << line;
  const size_t b = line.find(" -B ");
  ASSERT_NE(b, std::string::npos) << line;
  const std::string B = line.substr(b + 4, line.find(' ', b + 4) - b - 4);
  EXPECT_NE(r.out.find("B=" + B + " T=64"), std::string::npos) << r.out;  // what bench then ran
  EXPECT_NE(r.out.find("recompute=selective"), std::string::npos) << r.out;

  // `--hardware this` in gpt memplan --time and gpt plan names the same cached calibration, measuring nothing
  CliResult m = run_gpt("memplan --config d2 --vocab 257 -B 2 -T 64 --time --hardware this --json");
  ASSERT_EQ(m.code, 0) << m.out;
  EXPECT_EQ(m.out.find("calibrating"), std::string::npos) << m.out;
  EXPECT_EQ(JsonParser(m.out).parse().at("time").at("hardware_file").str, dir + "/cpu_hardware.json") << m.out;
  CliResult p = run_gpt("plan --config d2 --vocab 257 -T 64 --total-batch 512 --hardware this --json");
  ASSERT_EQ(p.code, 0) << p.out;
  EXPECT_EQ(p.out.find("calibrating"), std::string::npos) << p.out;
  EXPECT_NE(p.out.find(dir + "/cpu_hardware.json"), std::string::npos) << p.out;
  // on the cpu `this` is this launch's calibration: a plan for another world or thread count is refused
  expect_one_error_line(run_gpt("memplan --config d2 --world 2 --time --hardware this"), "--hardware this");
  expect_one_error_line(run_gpt("plan --config d2 -T 64 --total-batch 512 --threads-per-rank 2 --hardware this"),
                        "--hardware this");
}

// A GPU's name (as cudaDeviceProp and nvidia-smi give it) picks its datasheet; a part the files do not describe
// is refused rather than priced by another's (h100.json is the SXM part's: not a PCIe or NVL H100's).
TEST(PlanCli, AGpusNamePicksItsDatasheet) {
  const std::pair<const char*, const char*> named[] = {
      {"NVIDIA H100 80GB HBM3", "h100.json"},     {"NVIDIA H200", "h200.json"},
      {"NVIDIA A100-SXM4-80GB", "a100_80gb.json"}, {"NVIDIA A100-SXM4-40GB", "a100_40gb.json"},
      {"NVIDIA A100 80GB PCIe", "a100_80gb.json"}, {"Tesla V100-SXM2-32GB", "v100_dgx2.json"}};
  for (const auto& [name, file] : named) EXPECT_EQ(gpu_datasheet_for(name, "d"), std::string("d/hardware/") + file) << name;
  for (const char* name : {"NVIDIA H100 PCIe", "NVIDIA H100 NVL", "NVIDIA GeForce RTX 4090"}) {
    try {
      gpu_datasheet_for(name, "d");
      ADD_FAILURE() << "priced " << name;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(std::string("this GPU (") + name + ")"), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace gpt::test
