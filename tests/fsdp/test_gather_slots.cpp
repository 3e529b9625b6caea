// --gather-slots K: the unit in use plus K-1 units gathered ahead of it (src/fsdp/param_side.cpp,
// prefetch_after). A real run's --trace is read back and held to the rule: while a unit computes, the
// all-gathers started and not yet finished are exactly the units at positions p+1 .. p+K-1 of the pass's
// order after the acquired unit's position p (Layout::pass_order), less the root unit (own slot, gathered
// once) and units already gathered (grad_op's backward), and nothing at all with one rank. So some compute
// has exactly K-1 gathers in flight, none more, and K = 1 none; the time model's simulated step (the same
// engine on the simulated machine) has the same gathers in flight at every acquire. Prefetch changes when a unit is gathered,
// not what: K = 1..4 train bit-identical losses and parameters, with the same traffic.
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <set>

#include "src/core/check.h"
#include "src/core/rng.h"
#include "src/io/atomic_file.h"
#include "src/io/data_loader.h"
#include "src/plan/hardware.h"
#include "src/plan/timemodel.h"
#include "src/train/trainer.h"
#include "src/util/trace.h"
#include "tests/common/json_lite.h"
#include "tests/common/tiny_config.h"
#include "tests/fsdp/fsdp_run.h"
#include "tests/fsdp/mpi_world.h"
#include "tests/fsdp/random_shard.h"

namespace gpt::test {
namespace {

constexpr int kLayers = 4;  // 6 units: a window of K-1 = 3 fits inside each pass

struct TraceCase {
  ShardStrategy strategy;
  OffloadMode offload;
  int slots;
  std::string label() const {
    return str(FsdpOptions::name(strategy), offload == OffloadMode::params ? " offload params" : "", " K=", slots);
  }
};

// The units the rule has in flight while the compute span `what` ("forward block2", "backward lm_head",
// "recompute block1", ...) runs: its pass, the position p of the last unit the pass acquired, then
// positions p+1 .. p+K-1 of that pass's order, root and kept-gathered units left out.
std::set<std::string> expected_in_flight(const Layout& l, const std::string& what, const TraceCase& c, int world) {
  const size_t sp = what.find(' ');
  const std::string kind = what.substr(0, sp), unit = what.substr(sp + 1);
  std::set<std::string> out;
  // Outside the passes (the trainer's "wait for reductions"): every gather of a pass is used in it.
  if (kind != "forward" && kind != "backward" && kind != "recompute") return out;
  const Pass pass = kind == "forward" ? Pass::forward : Pass::backward;
  const std::vector<int>& order = l.pass_order(pass);
  const int n = (int)order.size();
  int p = -1;
  // the final layernorm and the LM head (in the root unit): after the last block (forward), right after the
  // root's acquire (backward)
  if (unit == "lm_head" || unit == "lnf") p = pass == Pass::forward ? n - 1 : 0;
  if (unit == "embed") p = pass == Pass::forward ? 0 : n - 1;     // the encoder: first of forward, last of backward
  for (int j = 0; j < n && p < 0; j++)
    if (l.unit(order[j]).name == unit) p = j;
  EXPECT_GE(p, 0) << "no unit for compute span " << what;
  if (world == 1) return out;  // one rank reads its shards in place: nothing is gathered
  if (pass == Pass::backward && c.strategy == ShardStrategy::grad_op) return out;  // forward's gathers kept
  for (int j = p + 1; j <= std::min(n - 1, p + c.slots - 1); j++)
    if (order[j] != l.embed_unit()) out.insert("gather " + l.unit(order[j]).name);
  return out;
}

// Runs 2 training steps with --trace and returns the trace's events.
std::vector<JValue> traced_run(const TraceCase& c, const std::string& dir) {
  Communicator& w = world();
  TrainOptions o = traced_run_options(dir, tiny_config(kLayers, 2, 64, 32, 97));
  o.fsdp.strategy = c.strategy;
  o.fsdp.offload = c.offload;
  o.fsdp.gather_slots = c.slots;
  {
    Trainer t(o, w);
    t.run();
  }
  w.barrier();
  std::vector<JValue> ev = parse_json(read_file(o.trace_path)).at("traceEvents").arr;
  w.barrier();  // every rank has read it before the next case rewrites it
  return ev;
}

// One compute span of a rank's trace: its name, the all-gathers in flight at any point of it (started and not
// finished, on the gather-slot tracks), and the most at once.
struct ComputeSpan {
  std::string name;
  std::set<std::string> in_flight;
  int most = 0;
};

// Rank `pid`'s compute spans, read in recording order (each rank's events are written as they happened).
std::vector<ComputeSpan> compute_spans(const std::vector<JValue>& ev, int pid) {
  std::map<int, std::vector<std::string>> open;  // [gather track]: open spans
  std::vector<ComputeSpan> out;
  bool computing = false;
  for (const JValue& e : ev) {
    const std::string ph = e.at("ph").str;
    if ((ph != "B" && ph != "E") || (int)e.at("pid").num != pid) continue;
    const int tid = (int)e.at("tid").num;
    if (tid >= trace::kGatherSlot0 && tid < trace::kReduceSlot0) {
      if (ph == "B") open[tid].push_back(e.at("name").str);
      else if (!open[tid].empty()) open[tid].pop_back();
      else ADD_FAILURE() << "rank " << pid << ": gather slot track " << tid << " ends a span it never began";
    }
    if (tid == trace::kCompute && ph == "B") {
      out.push_back(ComputeSpan{e.at("name").str, {}, 0});
      computing = true;
    }
    if (computing) {
      int now = 0;
      for (const auto& [track, names] : open) {
        out.back().in_flight.insert(names.begin(), names.end());
        now += (int)names.size();
      }
      out.back().most = std::max(out.back().most, now);
    }
    if (tid == trace::kCompute && ph == "E") computing = false;
  }
  return out;
}

const char* kHardware = R"({"name": "gather slots test", "kind": "cpu", "dtype": "fp32", "peak_flops": 1e10,
  "cores": 4, "profiles": [{"gemm": 1e10, "stream": 1e10}], "network": {"intra": {"bandwidth": 1e9, "latency_s": 1e-5}}})";

// The time model's input for traced_run's configuration.
TimeModelInput time_input(const TraceCase& c, int world) {
  TimeModelInput in;
  in.run.cfg = tiny_config(kLayers, 2, 64, 32, 97);
  in.run.world = world;
  in.run.fsdp.strategy = c.strategy;
  in.run.fsdp.offload = c.offload;
  in.run.fsdp.gather_slots = c.slots;
  in.run.B = 2;
  in.run.T = 32;
  in.run.compute = DType::F32;
  return in;
}

TEST(GatherSlots, TraceShowsKMinusOneGathersInFlightBeyondTheUnitInUse) {
  Communicator& w = world();
  const std::string dir = random_shard_dir("gather_slots", 97);
  const Layout layout(tiny_config(kLayers, 2, 64, 32, 97));
  const std::vector<TraceCase> cases = {
      {ShardStrategy::full, OffloadMode::none, 1},     {ShardStrategy::full, OffloadMode::none, 2},
      {ShardStrategy::full, OffloadMode::none, 3},     {ShardStrategy::full, OffloadMode::none, 4},
      {ShardStrategy::grad_op, OffloadMode::none, 3},  {ShardStrategy::full, OffloadMode::params, 3},
  };
  const HardwareSpec hw = parse_hardware(kHardware, "gather_slots_test.json");
  for (const TraceCase& c : cases) {
    const std::vector<JValue> ev = traced_run(c, dir);
    const TimePlan plan = plan_time(time_input(c, w.world()), hw);
    int most = 0;
    for (int pid = 0; pid < w.world(); pid++) {
      const std::vector<ComputeSpan> spans = compute_spans(ev, pid);
      std::vector<int> ahead;  // per acquire: gathers in flight while the acquired unit computes
      int model_spans = 0;
      for (size_t i = 0; i < spans.size(); i++) {
        const ComputeSpan& sp = spans[i];
        EXPECT_EQ(sp.in_flight, expected_in_flight(layout, sp.name, c, w.world()))
            << c.label() << ", rank " << pid << ", while computing " << sp.name;
        most = std::max(most, sp.most);
        if (sp.name.rfind("wait", 0) == 0) continue;  // the trainer's, between the passes
        model_spans++;
        const std::string unit = sp.name.substr(sp.name.find(' ') + 1);
        const bool after_recompute = i > 0 && spans[i - 1].name == "recompute " + unit;  // the same acquire
        const bool in_root = unit == "lnf" || sp.name == "forward lm_head" || sp.name == "backward embed";
        if (!in_root && !after_recompute)
          ahead.push_back((int)sp.in_flight.size());
      }
      EXPECT_EQ(model_spans, 2 * (2 * kLayers + 6)) << c.label();  // 2 steps of forward + backward
      // The time model's simulated step (the same engine on the simulated machine) has the same gathers in
      // flight at every acquire.
      std::vector<int> simulated = plan.gathers_ahead;
      simulated.insert(simulated.end(), plan.gathers_ahead.begin(), plan.gathers_ahead.end());  // 2 steps
      EXPECT_EQ(ahead, simulated) << c.label() << ", rank " << pid << " (trace, then the time model)";
    }
    if (w.rank() == 0) std::printf("[gather-slots] %s N=%d: at most %d gathers in flight\n", c.label().c_str(),
                                   w.world(), most);
    EXPECT_EQ(most, w.world() == 1 ? 0 : c.slots - 1) << c.label();
  }
}

// Prefetch depth changes when a unit is gathered, never what is computed: for each strategy, K = 1..4 give
// the same losses, parameters and traffic, bit for bit.
TEST(GatherSlots, PrefetchDepthChangesNothingComputed) {
  Communicator& w = world();
  struct Mode {
    ShardStrategy st;
    OffloadMode off;
    const char* recompute;
    const char* label;
  };
  const std::vector<Mode> modes = {{ShardStrategy::full, OffloadMode::none, "none", "full"},
                                   {ShardStrategy::full, OffloadMode::params, "every:2", "full offload params every:2"},
                                   {ShardStrategy::grad_op, OffloadMode::none, "none", "grad_op"},
                                   {ShardStrategy::hybrid, OffloadMode::none, "full", "hybrid recompute full"}};
  for (const Mode& m : modes) {
    std::vector<float> ref_losses;
    std::vector<std::vector<float>> ref_params;
    int64_t ref_bytes = 0;
    for (int K = 1; K <= 4; K++) {
      RunSpec s;
      s.cfg = tiny_config(kLayers, 2, 64, 16, 97);
      s.global_seqs = 24;
      s.accum = 2;  // 24 / (2 N) sequences per rank and micro-step for N = 1..4
      s.fsdp.strategy = m.st;
      s.fsdp.offload = m.off;
      s.fsdp.gather_slots = K;
      if (m.st == ShardStrategy::hybrid) s.fsdp.shard_group = w.world() % 2 == 0 ? 2 : 1;
      s.recompute = RecomputePolicy::parse(m.recompute);
      ShardedRun run(s, w);
      std::vector<float> losses;
      run.engine->begin_traffic_step();
      for (int i = 0; i < 6; i++) losses.push_back(run.train_step());
      const int64_t bytes = run.engine->traffic_step().total_sent();
      const std::string what = str(m.label, " K=", K);
      if (K == 1) {
        ref_losses = losses;
        ref_params = run.params();
        ref_bytes = bytes;
        continue;
      }
      EXPECT_EQ(losses, ref_losses) << what;
      EXPECT_EQ(run.params(), ref_params) << what;
      EXPECT_EQ(bytes, ref_bytes) << what;
    }
  }
}

}  // namespace
}  // namespace gpt::test
