// The --trace of GPU ranks in device time, on the emulated machine (tests/simt/streams.h: each stream's clock
// follows stream order at a fixed cost model, whatever order the emulator ran the streams in). The compute,
// copy and comm streams each have a track whose spans are when the work ran on the device, so the overlaps
// the engine is built for can be read off the trace:
//  - a prefetched gather (comm stream) runs beside the previous unit's compute;
//  - under --offload params, each unit's upload (copy stream) runs beside compute, at 1 and 2 ranks, and
//    starts before the compute of the unit before it ends;
//  - under hybrid sharding, a unit's replica all-reduce is in flight while the next unit's backward runs.
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "tests/common/json_lite.h"
#include "tests/common/test_paths.h"
#include "tests/simt/test/simt_cli.h"

namespace gpt::test {
namespace {

const std::string kThreeLayers = "--n-layer 3 --n-head 2 --d-model 64 --seq-len 32 --tokenizer byte ";

struct Span {
  double t0 = 0, t1 = 0;
};
bool overlap(const Span& a, const Span& b) { return a.t0 < b.t1 && b.t0 < a.t1; }

// Rank 0's spans by track name, then by span name, in the order they ran.
using Tracks = std::map<std::string, std::map<std::string, std::vector<Span>>>;

Tracks rank0_spans(const std::string& path) {
  const JValue doc = parse_json(read_log(path));
  std::map<int, std::string> track_name;
  std::map<int, std::vector<std::pair<std::string, double>>> open;
  Tracks out;
  for (const JValue& e : doc.at("traceEvents").arr) {
    if ((int)e.at("pid").num != 0) continue;
    const std::string ph = e.at("ph").str;
    if (ph == "M" && e.at("name").str == "thread_name") track_name[(int)e.at("tid").num] = e.at("args").at("name").str;
    if (ph != "B" && ph != "E") continue;
    const int tid = (int)e.at("tid").num;
    if (ph == "B") {
      open[tid].push_back({e.at("name").str, e.at("ts").num});
      continue;
    }
    EXPECT_FALSE(open[tid].empty()) << "an end without a begin on track " << tid;
    if (open[tid].empty()) continue;
    const auto [name, t0] = open[tid].back();
    open[tid].pop_back();
    out[std::to_string(tid)][name].push_back({t0, e.at("ts").num});
  }
  Tracks named;
  for (auto& [tid, spans] : out) named[track_name[std::stoi(tid)]] = spans;
  return named;
}

// `gpt_simt train` on n ranks with a trace; rank 0's spans.
Tracks traced_run(int n, const std::string& flags, const std::string& name) {
  const std::string trace = scratch_dir() + "/" + name + ".json";
  const CliResult r = run_ranks(n,
                                "train " + kThreeLayers + "-T 32 --sample-tokens 0 --steps 2 --train '" +
                                    shakespeare_byte_dir() + "/train_*.bin' --device cuda --attention fused --trace " +
                                    trace + " " + flags,
                                "phases");
  EXPECT_EQ(r.code, 0) << r.out;
  return rank0_spans(trace);
}

// The first span called `name` on `track`, or a failure naming what is missing.
Span first(const Tracks& t, const std::string& track, const std::string& name) {
  auto tr = t.find(track);
  if (tr == t.end() || !tr->second.count(name)) {
    ADD_FAILURE() << "no span '" << name << "' on the track '" << track << "'";
    return {};
  }
  return tr->second.at(name).front();
}

TEST(SimtDeviceTrace, APrefetchedGatherRunsBesideThePreviousUnitsCompute) {
  SKIP_WITHOUT_RANKS();
  const Tracks t = traced_run(2, "-B 2 --shard full --gather-slots 2", "gather");
  ASSERT_TRUE(t.count("comm stream")) << "no comm-stream track: the collectives are not traced in device time";
  for (int l = 0; l + 1 < 3; l++) {
    const Span gather = first(t, "comm stream", "all-gather block" + std::to_string(l + 1));
    const Span compute = first(t, "compute", "forward block" + std::to_string(l));
    EXPECT_LT(gather.t0, gather.t1);
    EXPECT_TRUE(overlap(gather, compute)) << "the gather of block " << l + 1 << " [" << gather.t0 << ", " << gather.t1
                                          << "] does not overlap the forward of block " << l << " [" << compute.t0
                                          << ", " << compute.t1 << "]";
  }
}

// Each block's upload (after the first) overlaps a compute span, and starts before the forward of the block
// before it ends.
void expect_uploads_beside_compute(const Tracks& t, int ranks) {
  std::vector<Span> computes;
  for (const auto& [name, spans] : t.at("compute"))
    for (const Span& s : spans) computes.push_back(s);
  for (int l = 1; l < 3; l++) {
    const Span up = first(t, "copies h2d", "h2d block" + std::to_string(l));
    const Span before = first(t, "compute", "forward block" + std::to_string(l - 1));
    EXPECT_LT(up.t0, before.t1) << ranks << " ranks: the upload of block " << l << " starts after block " << l - 1
                                << "'s forward ended";
    bool beside = false;
    for (const Span& c : computes) beside = beside || overlap(up, c);
    EXPECT_TRUE(beside) << ranks << " ranks: the upload of block " << l << " [" << up.t0 << ", " << up.t1
                        << "] overlaps no compute span (compute waited for it)";
  }
}

TEST(SimtDeviceTrace, OffloadedParametersUploadBesideCompute) {
  SKIP_WITHOUT_RANKS();
  expect_uploads_beside_compute(traced_run(1, "-B 2 --offload params", "offload1"), 1);
  expect_uploads_beside_compute(traced_run(2, "-B 2 --shard full --offload params", "offload2"), 2);
}

TEST(SimtDeviceTrace, HybridReplicaAllReduceRunsBesideTheNextBackward) {
  SKIP_WITHOUT_RANKS();
  const Tracks t = traced_run(4, "-B 1 --shard hybrid --shard-group 2", "hybrid");
  for (int l = 2; l >= 1; l--) {
    const std::vector<Span>& all_reduces = t.at("comm stream").at("all-reduce block" + std::to_string(l));
    const Span backward = first(t, "compute", "backward block" + std::to_string(l - 1));
    EXPECT_TRUE(overlap(all_reduces.front(), backward))
        << "the replica all-reduce of block " << l << " [" << all_reduces.front().t0 << ", " << all_reduces.front().t1
        << "] is not in flight during the backward of block " << l - 1 << " [" << backward.t0 << ", " << backward.t1
        << "]";
  }
}

}  // namespace
}  // namespace gpt::test
