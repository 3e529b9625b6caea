// The --trace timeline of a real sharded run (a 3-layer d2-shaped model, --shard full): well-formed JSON that
// Perfetto and chrome://tracing load (an object with "traceEvents"), one process per rank, timestamps
// monotone per track, balanced B/E events, and the prefetch visible: the gather of block i+1 starts before
// the forward compute of block i finishes. Beside it the same run on the naive engine (--engine naive), whose
// every gather is waited for in full: no gather overlaps any compute, and block i+1's starts after block i's
// forward ends.
#include <gtest/gtest.h>

#include <filesystem>
#include <map>

#include "tests/common/json_lite.h"
#include "tests/common/test_paths.h"
#include "src/core/rng.h"
#include "tests/fsdp/mpi_world.h"
#include "tests/fsdp/random_shard.h"
#include "src/io/atomic_file.h"
#include "src/io/data_loader.h"
#include "src/train/trainer.h"
#include "tests/common/tiny_config.h"

namespace gpt::test {
namespace {

using Spans = std::map<std::string, std::vector<std::pair<double, double>>>;  // name -> [begin, end) in us

// Rank 0's spans of a trace file, by name.
Spans rank0_spans(const std::string& path) {
  JValue doc = parse_json(read_file(path));
  Spans spans;
  std::map<int, std::vector<std::string>> open;  // tid -> names begun
  for (const JValue& e : doc.at("traceEvents").arr) {
    const std::string ph = e.at("ph").str;
    if (ph == "M" || ph == "C" || (int)e.at("pid").num != 0) continue;
    const int tid = (int)e.at("tid").num;
    if (ph == "B") {
      open[tid].push_back(e.at("name").str);
      spans[e.at("name").str].push_back({e.at("ts").num, -1});
    } else {
      spans[open[tid].back()].back().second = e.at("ts").num;
      open[tid].pop_back();
    }
  }
  return spans;
}

TEST(Trace, NaiveEngineWaitsForEveryGatherInFull) {
  Communicator& w = world();
  if (w.world() == 1) GTEST_SKIP() << "one rank has nothing to gather";
  const std::string dir = random_shard_dir("trace_naive", 97);
  TrainOptions o = traced_run_options(dir, tiny_config(3, 2, 128, 32, 97));
  o.fsdp.engine = EngineKind::naive;
  {
    Trainer t(o, w);
    t.run();
  }
  if (w.rank() != 0) return;
  const Spans spans = rank0_spans(o.trace_path);
  std::vector<std::pair<double, double>> gathers, compute;
  for (const auto& [name, list] : spans) {
    if (name.rfind("gather ", 0) == 0) gathers.insert(gathers.end(), list.begin(), list.end());
    if (name.rfind("forward ", 0) == 0 || name.rfind("backward ", 0) == 0)
      compute.insert(compute.end(), list.begin(), list.end());
  }
  ASSERT_GE(gathers.size(), 2u * 2 * 4);  // 2 steps, 2 passes, 4 units
  ASSERT_FALSE(compute.empty());
  for (const auto& g : gathers)
    for (const auto& c : compute)
      EXPECT_FALSE(g.first < c.second && c.first < g.second)
          << "a gather [" << g.first << ", " << g.second << ") overlaps compute [" << c.first << ", " << c.second << ")";
  for (int i = 0; i < 2; i++) {  // the opposite of the full engine's prefetch below
    const auto& g = spans.at("gather block" + std::to_string(i + 1));
    EXPECT_GE(g.front().first, spans.at("forward block" + std::to_string(i)).front().second) << "gather block" << i + 1;
  }
}

TEST(Trace, FullShardStepTimelineIsValidAndShowsPrefetch) {
  Communicator& w = world();
  const std::string dir = random_shard_dir("trace", 97);
  TrainOptions o = traced_run_options(dir, tiny_config(3, 2, 128, 32, 97));
  {
    Trainer t(o, w);
    t.run();
  }
  if (w.rank() != 0) return;
  JValue doc = parse_json(read_file(o.trace_path));
  const auto& ev = doc.at("traceEvents").arr;
  ASSERT_GT(ev.size(), 20u);
  std::map<std::pair<int, int>, double> last_ts;
  std::map<std::pair<int, int>, std::vector<std::string>> open;
  std::map<int, bool> pids;
  // per rank 0: begin/end times of named spans
  std::map<std::string, std::vector<std::pair<double, double>>> spans;
  for (const JValue& e : ev) {
    const std::string ph = e.at("ph").str;
    const int pid = (int)e.at("pid").num;
    pids[pid] = true;
    if (ph == "M" || ph == "C") continue;
    const int tid = (int)e.at("tid").num;
    const double ts = e.at("ts").num;
    auto key = std::make_pair(pid, tid);
    if (last_ts.count(key)) {
      EXPECT_GE(ts, last_ts[key]) << "timestamps go back on pid " << pid << " tid " << tid;
    }
    last_ts[key] = ts;
    if (ph == "B") {
      open[key].push_back(e.at("name").str);
      if (pid == 0) spans[e.at("name").str].push_back({ts, -1});
    } else {
      ASSERT_EQ(ph, "E");
      ASSERT_FALSE(open[key].empty()) << "E without B on tid " << tid;
      std::string name = open[key].back();
      open[key].pop_back();
      if (pid == 0) spans[name].back().second = ts;
    }
  }
  for (auto& kv : open) EXPECT_TRUE(kv.second.empty()) << "unbalanced B/E on tid " << kv.first.second;
  EXPECT_EQ((int)pids.size(), w.world());  // one process per rank
  ASSERT_TRUE(spans.count("forward block0") && spans.count("forward block1"));
  if (w.world() == 1) {
    EXPECT_FALSE(spans.count("gather block1")) << "one rank gathers nothing";
    return;
  }
  // prefetch: in each step's forward, gather(block i+1) starts before compute(block i) ends
  for (int i = 0; i < 2; i++) {
    const std::string next = "gather block" + std::to_string(i + 1);
    const auto& fwd = spans["forward block" + std::to_string(i)];
    const auto& g = spans[next];
    ASSERT_FALSE(fwd.empty());
    ASSERT_FALSE(g.empty());
    EXPECT_LT(g.front().first, fwd.front().second) << next << " must start before forward block" << i << " ends";
  }
  EXPECT_TRUE(spans.count("reduce-scatter block0"));
  EXPECT_TRUE(spans.count("adamw"));
}

}  // namespace
}  // namespace gpt::test
