// Recompute and offload under sharding: at the current world size, 20 steps with each recompute mode and
// each offload mode give bit-identical losses and parameters to the run without them (the same ops on the
// same values in the same order); with recompute, the backward gather serves the re-run forward too, so the
// traffic is unchanged (no third gather); with offload, the device holds no model-state bytes but the
// gather and staging slots.
#include <gtest/gtest.h>

#include "tests/fsdp/fsdp_run.h"
#include "tests/fsdp/mpi_world.h"
#include "tests/common/tiny_config.h"

namespace gpt::test {
namespace {

RunSpec base_spec() {
  RunSpec s;
  s.cfg = tiny_config(3, 2, 64, 16, 97);
  s.global_seqs = 12;
  return s;
}

TEST(FsdpLevers, RecomputeAndOffloadAreBitIdenticalAndRecomputeAddsNoTraffic) {
  Communicator& w = world();
  RunSpec s = base_spec();
  ShardedRun ref(s, w);
  std::vector<float> losses;
  ref.engine->begin_traffic_step();
  for (int i = 0; i < 20; i++) losses.push_back(ref.train_step());
  const int64_t ref_bytes = ref.engine->traffic_step().total_sent();
  auto ref_params = ref.params();
  for (const char* rc : {"full", "every:2", "selective"}) {
    RunSpec r = s;
    r.recompute = RecomputePolicy::parse(rc);
    ShardedRun run(r, w);
    run.engine->begin_traffic_step();
    for (int i = 0; i < 20; i++) EXPECT_EQ(run.train_step(), losses[i]) << rc << " step " << i + 1;
    EXPECT_EQ(run.engine->traffic_step().total_sent(), ref_bytes) << rc;
    EXPECT_EQ(run.params(), ref_params) << rc;
  }
  for (const char* off : {"optimizer", "params"}) {
    RunSpec r = s;
    r.fsdp.offload = FsdpOptions::parse_offload(off);
    ShardedRun run(r, w);
    for (int i = 0; i < 20; i++) EXPECT_EQ(run.train_step(), losses[i]) << off << " step " << i + 1;
    EXPECT_EQ(run.params(), ref_params) << off;
    const MemoryLedger& led = run.be->ledger();
    // model states live on the host; on the device only the compute copy of the shard (optimizer mode)
    for (MemCat c : {MemCat::grad_shard, MemCat::optim_state})
      EXPECT_EQ(led.current(MemDomain::device, c), 0) << off << " " << memcat_name(c);
    const int64_t dev_params = led.current(MemDomain::device, MemCat::param_shard);
    if (std::string(off) == "params") EXPECT_EQ(dev_params, 0);
    else EXPECT_EQ(dev_params, run.engine->model_state_bytes() / 4);
    EXPECT_EQ(led.current(MemDomain::host, MemCat::param_shard) + led.current(MemDomain::host, MemCat::grad_shard) +
                  led.current(MemDomain::host, MemCat::optim_state),
              run.engine->model_state_bytes());
  }
}

// Activation offload moves what each block keeps to the host and back: under every recompute mode, alone
// and with each offload of the states, 20 steps give the losses and parameters of the run without it; the
// device's activation bytes shrink to the ring and the host holds every layer's kept buffers.
TEST(FsdpLevers, ActivationOffloadIsBitIdenticalUnderEveryRecomputeAndStatesOffload) {
  Communicator& w = world();
  for (const char* rc : {"none", "full", "every:2", "selective"}) {
    RunSpec s = base_spec();
    s.cfg = tiny_config(5, 2, 64, 16, 97);  // more layers than the ring's 3 slots
    s.recompute = RecomputePolicy::parse(rc);
    ShardedRun ref(s, w);
    std::vector<float> losses;
    for (int i = 0; i < 20; i++) losses.push_back(ref.train_step());
    const auto ref_params = ref.params();
    const int64_t ref_device = ref.be->ledger().current(MemDomain::device, MemCat::activation);
    for (OffloadMode off : {OffloadMode::none, OffloadMode::optimizer, OffloadMode::params}) {
      RunSpec r = s;
      r.fsdp.offload = off;
      r.offload_activations = true;
      ShardedRun run(r, w);
      const std::string what = std::string(rc) + " offload " + FsdpOptions::name(off) + ",activations";
      for (int i = 0; i < 20; i++) ASSERT_EQ(run.train_step(), losses[i]) << what << " step " << i + 1;
      EXPECT_EQ(run.params(), ref_params) << what;
      const MemoryLedger& led = run.be->ledger();
      // 5 layers in a ring of 3: at least two block inputs fewer on the device (the memplan tests hold the
      // bytes exactly); the host holds a copy of what each layer keeps.
      EXPECT_LT(led.current(MemDomain::device, MemCat::activation), ref_device) << what;
      EXPECT_GT(led.current(MemDomain::host, MemCat::activation),
                ref.be->ledger().current(MemDomain::host, MemCat::activation))
          << what;
    }
  }
}

}  // namespace
}  // namespace gpt::test
