// The time model's collectives against the communication ledger: for every strategy, hybrid group, reduce
// dtype, --no-sync with accumulation, gather-slot count, recompute and offload, one training step's bytes per
// collective kind (engine->traffic_step()) equal plan_time(...).bytes exactly, at every world size ctest runs
// (mpiexec -n 1..4). This now holds by construction: the time model runs the same engine on the simulated
// machine, whose communicators record each call with the ring accounting of dist/comm_volume.h as the real
// ones do; the test stays as the proof that the simulated step makes the calls a real step makes.
#include <gtest/gtest.h>

#include <string>

#include "src/core/check.h"
#include "src/plan/hardware.h"
#include "src/plan/timemodel.h"
#include "tests/common/tiny_config.h"
#include "tests/fsdp/fsdp_run.h"
#include "tests/fsdp/mpi_world.h"

namespace gpt::test {
namespace {

const char* kHardware = R"({"name": "ledger test", "kind": "cpu", "dtype": "fp32", "peak_flops": 1e10, "cores": 4,
  "profiles": [{"gemm": 1e10, "stream": 1e10}], "network": {"intra": {"bandwidth": 1e9, "latency_s": 1e-5}}})";

struct Case {
  std::string name;
  ShardStrategy strategy = ShardStrategy::full;
  int group = 0;  // hybrid
  int accum = 1;
  bool no_sync = false;
  DType reduce = DType::F32;
  int slots = 2;
  const char* recompute = "none";
  OffloadMode offload = OffloadMode::none;
};

std::vector<Case> cases(int N) {
  std::vector<Case> c = {
      {"full"},
      {"grad_op", ShardStrategy::grad_op},
      {"none", ShardStrategy::none},
      {"full accum 2", ShardStrategy::full, 0, 2},
      {"full no-sync accum 2", ShardStrategy::full, 0, 2, true},
      {"none no-sync accum 2", ShardStrategy::none, 0, 2, true},
      {"full bf16 reduce", ShardStrategy::full, 0, 1, false, DType::BF16},
      {"none bf16 reduce", ShardStrategy::none, 0, 1, false, DType::BF16},
      {"full 1 slot", ShardStrategy::full, 0, 1, false, DType::F32, 1},
      {"full 3 slots recompute full", ShardStrategy::full, 0, 1, false, DType::F32, 3, "full"},
      {"grad_op recompute selective", ShardStrategy::grad_op, 0, 1, false, DType::F32, 2, "selective"},
      {"full offload optimizer", ShardStrategy::full, 0, 1, false, DType::F32, 2, "none", OffloadMode::optimizer},
      {"full offload params accum 2", ShardStrategy::full, 0, 2, false, DType::F32, 2, "every:2", OffloadMode::params},
  };
  for (int G = 1; G <= N; G++) {  // every hybrid group that divides the world
    if (N % G) continue;
    c.push_back({str("hybrid G=", G), ShardStrategy::hybrid, G});
    c.push_back({str("hybrid G=", G, " bf16 reduce accum 2"), ShardStrategy::hybrid, G, 2, false, DType::BF16});
  }
  return c;
}

TEST(TimeModelLedger, BytesPerKindEqualTheCommunicationLedger) {
  Communicator& w = world();
  const int N = w.world();
  const HardwareSpec hw = parse_hardware(kHardware, "ledger_test.json");
  for (const Case& k : cases(N)) {
    RunSpec s;
    s.cfg = tiny_config(3, 2, 64, 16, 101);
    s.fsdp.strategy = k.strategy;
    s.fsdp.shard_group = k.group;
    s.fsdp.no_sync = k.no_sync;
    s.fsdp.reduce_dtype = k.reduce;
    s.fsdp.gather_slots = k.slots;
    s.fsdp.offload = k.offload;
    s.recompute = RecomputePolicy::parse(k.recompute);
    s.accum = k.accum;
    s.global_seqs = 24;  // 24 / (accum * N) sequences per rank and micro-step for N = 1..4
    ShardedRun run(s, w);
    run.engine->begin_traffic_step();
    run.train_step();
    const CommCounters measured = run.engine->traffic_step();

    TimeModelInput in;
    in.run.cfg = s.cfg;
    in.run.world = N;
    in.run.fsdp = s.fsdp;
    in.run.recompute = s.recompute;
    in.run.B = s.global_seqs / (s.accum * N);
    in.run.T = s.T;
    in.run.compute = DType::F32;
    in.grad_accum = s.accum;
    const TimePlan p = plan_time(in, hw);
    for (int kind = 0; kind < kCollKinds; kind++)
      EXPECT_EQ(p.bytes[kind], measured.bytes_sent[kind])
          << k.name << ", N=" << N << ", " << collkind_name((CollKind)kind) << " (model calls " << p.calls[kind]
          << ", ledger calls " << measured.calls[kind] << ")";
    for (int kind = 0; kind < kCollKinds; kind++) {  // and as many collectives, where bytes move at all
      if (N == 1 || measured.bytes_sent[kind] == 0) continue;
      EXPECT_EQ(p.calls[kind], measured.calls[kind]) << k.name << ", N=" << N << ", " << collkind_name((CollKind)kind);
    }
  }
}

}  // namespace
}  // namespace gpt::test
