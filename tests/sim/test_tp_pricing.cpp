// Tensor parallelism's collectives as the time model prices them. The model issues them through the
// tensor-parallel sub-communicator (src/model/tensor_parallel.cpp) and the simulated machine runs them on the
// comm stream it shares with FSDP's (src/sim/sim_comm.cpp); the planner restates nothing. Checked here:
//  - the predicted trace shows them on the comm stream's track beside FSDP's, by kind and the model's label,
//    one at a time (one stream), each as long as the network model prices its bytes;
//  - a step's time grows by exactly their priced time when the intra-node link halves (computed from the
//    ledger's bytes), and by nothing without tensor parallelism;
//  - a group that leaves the node (T above the node's ranks, or groups straddling node boundaries) is
//    priced on the inter-node network, and the report says so, naming T and the node's size.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "src/core/check.h"
#include "src/plan/collectives.h"
#include "src/plan/hardware.h"
#include "src/plan/timemodel.h"
#include "src/util/trace.h"
#include "tests/common/json_lite.h"
#include "tests/common/test_paths.h"
#include "tests/common/tiny_config.h"

namespace gpt::test {
namespace {

constexpr double kIntraLatency = 5e-6, kInterLatency = 2e-5;

std::string gpu_json(int devices_per_node, double intra, double inter) {
  return str(R"({"name": "tp pricing gpu", "kind": "gpu", "dtype": "bf16", "peak_flops": 1e14,
    "op_overhead_s": 1e-6, "profiles": [{"gemm": [[1e6, 1e12], [1e9, 5e13]], "stream": 1e12}],
    "host": {"bandwidth": 1e11, "pcie": 2e10},
    "network": {"overlap": true, "devices_per_node": )",
             devices_per_node, R"(, "intra": {"bandwidth": )", intra, R"(, "latency_s": )", kIntraLatency,
             R"(}, "intra_topology": "nvswitch", "inter": {"bandwidth_per_node": )", inter, R"(, "latency_s": )",
             kInterLatency, "}}}");
}

TimeModelInput run(int world, int T, bool sp = true) {
  TimeModelInput in;
  in.run.cfg = tiny_config(2, 4, 256, 256, 1000);
  in.run.world = world;
  in.run.tp.size = T;
  in.run.tp.sequence_parallel = T > 1 && sp;
  in.run.B = 4;
  in.run.T = 256;
  in.run.compute = DType::BF16;
  return in;
}

int64_t total(const std::array<int64_t, kCollKinds>& a) {
  int64_t s = 0;
  for (int64_t x : a) s += x;
  return s;
}

struct Span {
  std::string name;
  double t0, t1;
};

// The finished spans of one track of a trace file, in the order they began.
std::vector<Span> track(const std::string& path, int tid) {
  const JValue doc = parse_json(slurp(path));
  std::vector<Span> out, open;
  for (const JValue& e : doc.at("traceEvents").arr) {
    const std::string ph = e.at("ph").str;
    if ((ph != "B" && ph != "E") || (int)e.at("tid").num != tid) continue;
    if (ph == "B") {
      open.push_back({e.at("name").str, e.at("ts").num, 0});
    } else if (!open.empty()) {
      open.back().t1 = e.at("ts").num;
      out.push_back(open.back());
      open.pop_back();
    }
  }
  std::sort(out.begin(), out.end(), [](const Span& a, const Span& b) { return a.t0 < b.t0; });
  return out;
}

// "all-gather block0 ln1 262144 B over 2": the kind and label ("all-gather block0 ln1"), bytes and group.
struct CommName {
  std::string head;
  int64_t bytes = -1;
  int group = 0;
};
CommName parse_name(const std::string& name) {
  CommName c;
  const size_t over = name.rfind(" B over ");
  if (over == std::string::npos) return c;
  const size_t num = name.rfind(' ', over - 1);
  c.head = name.substr(0, num);
  c.bytes = std::stoll(name.substr(num + 1, over - num - 1));
  c.group = std::stoi(name.substr(over + 8));
  return c;
}

double ring_seconds(const std::string& head, int64_t bytes, int group, const Link& l) {
  const CollKind k = head.rfind("all-gather", 0) == 0       ? CollKind::all_gather
                     : head.rfind("reduce-scatter", 0) == 0 ? CollKind::reduce_scatter
                                                            : CollKind::all_reduce;
  return l.latency * collective_steps(k, group) + (double)bytes / l.bandwidth;
}

// T = 2 over 4 ranks of one node: TP groups {0,1}, {2,3} and FSDP over the 2 data-parallel ranks.
TEST(TpPricing, TheTraceShowsTheTpCollectivesOnTheCommStreamBesideFsdps) {
  for (bool sp : {true, false}) {
    const std::string path = scratch_dir() + "/tp2.json";
    TimeModelInput in = run(4, 2, sp);
    in.trace_path = path;
    const Link intra{100e9, kIntraLatency};
    plan_time(in, parse_hardware(gpu_json(4, intra.bandwidth, 50e9), "tp.json"));
    const std::vector<Span> comm = track(path, trace::kCommStream);
    std::map<std::string, int> tp, fsdp;
    for (size_t i = 0; i < comm.size(); i++) {
      const CommName c = parse_name(comm[i].name);
      ASSERT_GT(c.bytes, 0) << comm[i].name;
      if (i > 0) {
        EXPECT_GE(comm[i].t0, comm[i - 1].t1 - 2e-3) << "one stream: " << comm[i].name << " overlaps";
      }
      // the model's labels name a block and the product ("block0 attproj"); the engine's name a unit alone
      const bool is_tp = c.head.find(" ln") != std::string::npos || c.head.find("proj") != std::string::npos;
      (is_tp ? tp : fsdp)[c.head]++;
      if (!is_tp) continue;
      EXPECT_EQ(c.group, 2) << comm[i].name;
      const double us = ring_seconds(c.head, c.bytes, 2, intra) * 1e6;
      EXPECT_NEAR(comm[i].t1 - comm[i].t0, us, 2e-3 + 1e-9 * us) << comm[i].name;  // the trace keeps 1 ns
    }
    for (int b = 0; b < 2; b++) {
      const std::string blk = str("block", b);
      if (sp) {
        for (const char* h : {"all-gather %s ln1", "reduce-scatter %s attproj", "all-gather %s ln2",
                              "reduce-scatter %s fcproj", "all-gather %s fcproj backward",
                              "reduce-scatter %s ln2 backward", "all-gather %s attproj backward",
                              "reduce-scatter %s ln1 backward"}) {
          std::string name = h;
          name.replace(name.find("%s"), 2, blk);
          EXPECT_EQ(tp[name], 1) << name << " (sp on)";
        }
      } else {
        for (const char* h : {"all-reduce %s attproj", "all-reduce %s fcproj", "all-reduce %s ln2 backward",
                              "all-reduce %s ln1 backward"}) {
          std::string name = h;
          name.replace(name.find("%s"), 2, blk);
          EXPECT_EQ(tp[name], 1) << name << " (sp off)";
        }
      }
      EXPECT_GE(fsdp["all-gather " + blk], 1) << "FSDP's gather of " << blk << " on the same track";
      EXPECT_GE(fsdp["reduce-scatter " + blk], 1) << "FSDP's reduce-scatter of " << blk << " on the same track";
    }
  }
}

// One data-parallel rank, so FSDP sends nothing and only the tensor-parallel group's collectives (and the
// loss's and norm's scalar reductions over the world, 16 bytes each) depend on the link. Every TP collective's
// result is needed by the very next product, so each is on the critical path: halving the link adds its bytes
// once more over the old bandwidth, latency x steps unchanged. T = 1 on one rank sends nothing: no change.
TEST(TpPricing, HalvingTheIntraLinkAddsExactlyTheTpCollectivesTime) {
  const double bw = 100e9;
  const HardwareSpec full = parse_hardware(gpu_json(8, bw, 50e9), "full.json");
  const HardwareSpec half = parse_hardware(gpu_json(8, bw / 2, 50e9), "half.json");
  for (bool sp : {true, false}) {
    const TimePlan a = plan_time(run(2, 2, sp), full), b = plan_time(run(2, 2, sp), half);
    ASSERT_EQ(total(a.bytes), 0) << "one data-parallel rank: FSDP moves nothing";
    ASSERT_EQ(a.tp_bytes, b.tp_bytes);
    const double expected = (double)total(a.tp_bytes) / bw;
    ASSERT_GT(expected, 1e-5 * a.step_s) << "the TP collectives must matter for the test to test anything";
    // the rest is the scalar reductions over the world (the loss's, the norm's): a whole number of 16 B / bw
    const double scalars = (b.step_s - a.step_s - expected) / (16 / bw);
    EXPECT_NEAR(scalars, std::round(scalars), 1e-3) << (sp ? "sp on" : "sp off");
    EXPECT_GE(std::round(scalars), 0);
    EXPECT_LE(std::round(scalars), 4);
  }
  const TimePlan a1 = plan_time(run(1, 1), full), b1 = plan_time(run(1, 1), half);
  EXPECT_EQ(total(a1.tp_bytes) + total(a1.bytes), 0);
  EXPECT_EQ(b1.step_s, a1.step_s);
}

bool has_note(const TimePlan& p, const std::vector<std::string>& words) {
  for (const std::string& n : p.notes) {
    bool all = true;
    for (const std::string& w : words) all = all && n.find(w) != std::string::npos;
    if (all) return true;
  }
  return false;
}

// T = 4 on nodes of 2 ranks, one data-parallel rank: the group spans two nodes, so every TP collective runs
// on the inter-node network (bandwidth min(intra, inter x 2/2) = inter here) and the report warns.
TEST(TpPricing, AGroupLargerThanANodeIsPricedOnTheNetworkAndWarned) {
  const double intra = 100e9, inter = 10e9;
  const auto hw = [](double i, double n) { return parse_hardware(gpu_json(2, i, n), "net.json"); };
  const TimePlan a = plan_time(run(4, 4), hw(intra, inter));
  EXPECT_TRUE(has_note(a, {"T = 4", "nodes of 2 ranks", "inter-node network"})) << (a.notes.empty() ? "" : a.notes[0]);
  const TimePlan slower_net = plan_time(run(4, 4), hw(intra, inter / 2));
  EXPECT_NEAR(slower_net.step_s - a.step_s, (double)total(a.tp_bytes) / inter, 8 * 16 / inter + 1e-12 * a.step_s);
  EXPECT_EQ(plan_time(run(4, 4), hw(intra / 2, inter)).step_s, a.step_s) << "the node's links carry none of it";
  EXPECT_FALSE(has_note(plan_time(run(4, 2), hw(intra, inter)), {"T = 2"})) << "T = 2 fits a node of 2";
}

// T = 2 on nodes of 3 ranks (--ranks-per-node 3), 6 ranks: groups {0,1} {2,3} {4,5}, and {2,3} crosses the
// first node boundary. Rank 0's group is on its node, but the step waits for the straddling one: every TP
// collective is priced on the network, whose node share the ring splits with the ring at the node's other
// boundary: bandwidth min(intra, inter / 2), inter-node latency.
TEST(TpPricing, GroupsStraddlingNodeBoundariesArePricedOnTheNetworkAndWarned) {
  const double intra = 100e9, inter = 10e9;
  const std::string path = scratch_dir() + "/straddle.json";
  TimeModelInput in = run(6, 2);
  in.ranks_per_node = 3;
  in.trace_path = path;
  const TimePlan p = plan_time(in, parse_hardware(gpu_json(8, intra, inter), "straddle.json"));
  EXPECT_TRUE(has_note(p, {"T = 2", "nodes of 3 ranks", "straddle"})) << (p.notes.empty() ? "" : p.notes[0]);
  int checked = 0;
  for (const Span& s : track(path, trace::kCommStream)) {
    const CommName c = parse_name(s.name);
    if (c.head.find(" ln") == std::string::npos && c.head.find("proj") == std::string::npos) continue;
    const double us = ring_seconds(c.head, c.bytes, 2, Link{std::min(intra, inter / 2), kInterLatency}) * 1e6;
    EXPECT_NEAR(s.t1 - s.t0, us, 2e-3 + 1e-9 * us) << s.name;
    checked++;
  }
  EXPECT_GE(checked, 16);  // 8 per block with sequence parallelism
  in.ranks_per_node = 2;   // aligned: no group crosses a node boundary, no warning
  in.trace_path.clear();
  EXPECT_FALSE(has_note(plan_time(in, parse_hardware(gpu_json(8, intra, inter), "aligned.json")), {"straddle"}));
  // hybrid's shard groups are consecutive blocks too: groups of 2 on nodes of 3 straddle alike
  TimeModelInput hybrid = run(6, 1);
  hybrid.run.fsdp.strategy = ShardStrategy::hybrid;
  hybrid.run.fsdp.shard_group = 2;
  hybrid.ranks_per_node = 3;
  EXPECT_TRUE(has_note(plan_time(hybrid, parse_hardware(gpu_json(8, intra, inter), "hybrid.json")),
                       {"hybrid shard groups of 2", "nodes of 3 ranks"}));
}

}  // namespace
}  // namespace gpt::test
