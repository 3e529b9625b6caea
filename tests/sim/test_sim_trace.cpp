// `gpt memplan --time --trace`'s simulated step (src/sim) as a Perfetto trace: the tracks of a real run's
// --trace, in simulated time, with the simulated comm stream beside them. On a GPU-like machine with slow
// compute and fast links, a prefetched gather (K = 2) runs on the comm stream while the previous unit
// computes; with K = 1 nothing is prefetched and no gather overlaps any compute. And the planner follows
// the engine's prefetch depth with no planner change: K - 1 gathers in flight per acquire.
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "src/core/check.h"
#include "src/plan/hardware.h"
#include "src/plan/timemodel.h"
#include "src/util/trace.h"
#include "tests/common/json_lite.h"
#include "tests/common/test_paths.h"
#include "tests/common/tiny_config.h"

namespace gpt::test {
namespace {

// Slow compute (1 TFLOP/s), fast links: a gather takes a fraction of a block's compute.
const char* kHardware = R"({"name": "trace test gpu", "kind": "gpu", "dtype": "bf16", "peak_flops": 1e12,
  "op_overhead_s": 1e-6, "profiles": [{"gemm": 1e12, "stream": 1e11}], "host": {"bandwidth": 1e11, "pcie": 2e10},
  "network": {"overlap": true, "devices_per_node": 8, "intra": {"bandwidth": 1e11, "latency_s": 1e-6},
              "intra_topology": "nvswitch",
              "inter": {"bandwidth_per_node": 1e11, "latency_s": 1e-6}}})";

struct Span {
  std::string name;
  double t0, t1;
};

// Every finished span of the trace, by track id.
std::map<int, std::vector<Span>> spans_of(const std::string& path) {
  const JValue doc = parse_json(slurp(path));
  std::map<int, std::vector<Span>> out;
  std::map<int, std::vector<Span>> open;
  for (const JValue& e : doc.at("traceEvents").arr) {
    const std::string ph = e.at("ph").str;
    if (ph != "B" && ph != "E") continue;
    const int tid = (int)e.at("tid").num;
    if (ph == "B") {
      open[tid].push_back({e.at("name").str, e.at("ts").num, 0});
    } else {
      EXPECT_FALSE(open[tid].empty()) << "track " << tid << " ends a span it never began";
      if (open[tid].empty()) continue;
      Span s = open[tid].back();
      open[tid].pop_back();
      s.t1 = e.at("ts").num;
      out[tid].push_back(s);
    }
  }
  return out;
}

TimePlan traced(int K, const std::string& path) {
  TimeModelInput in;
  in.run.cfg = tiny_config(6, 4, 256, 128, 1000);
  in.run.world = 4;
  in.run.fsdp.gather_slots = K;
  in.run.B = 4;
  in.run.T = 128;
  in.run.compute = DType::BF16;
  in.trace_path = path;
  return plan_time(in, parse_hardware(kHardware, "trace_test.json"));
}

// All-gathers on the simulated comm stream that overlap a forward compute span of a block.
int gathers_under_forward_compute(const std::map<int, std::vector<Span>>& tracks) {
  int n = 0;
  for (const Span& g : tracks.at(trace::kCommStream)) {
    if (g.name.rfind("all-gather", 0) != 0) continue;
    for (const Span& c : tracks.at(trace::kCompute))
      if (c.name.rfind("forward block", 0) == 0 && g.t0 < c.t1 && c.t0 < g.t1) {
        n++;
        break;
      }
  }
  return n;
}

TEST(SimTrace, APrefetchedGatherRunsUnderThePreviousUnitsCompute) {
  const std::string dir = scratch_dir();
  const TimePlan two = traced(2, dir + "/k2.json");
  const auto t2 = spans_of(dir + "/k2.json");
  ASSERT_TRUE(t2.count(trace::kCompute) && t2.count(trace::kCommStream) && t2.count(trace::kGatherSlot0));
  // forward: block1..block5 and head are gathered while the unit before them computes
  EXPECT_GE(gathers_under_forward_compute(t2), 5);
  const TimePlan one = traced(1, dir + "/k1.json");
  EXPECT_EQ(gathers_under_forward_compute(spans_of(dir + "/k1.json")), 0);
  EXPECT_GT(one.exposed_comm_s, two.exposed_comm_s);
  EXPECT_FALSE(trace::on());  // the simulated step's trace is finished and off
}

TEST(SimTrace, ThePlannerFollowsThePrefetchDepth) {
  for (int K : {1, 2, 3, 4}) {
    const TimePlan p = traced(K, "");
    int most = 0;
    for (int g : p.gathers_ahead) most = std::max(most, g);
    EXPECT_EQ(most, K - 1) << "K=" << K;
  }
}

}  // namespace
}  // namespace gpt::test
