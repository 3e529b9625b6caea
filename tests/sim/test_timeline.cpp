// The simulated machine's clock (src/sim/timeline.h), worked by hand: on the cpu backend everything runs on
// the host one after another; on a GPU the compute stream runs beside the host, waits charge its idle time
// to their cause, a copy starts after the work queued before it, and the phases sum to the step. And the
// stretches rule 5 reads (plan_search.h): model compute between waits on collectives issued and waited at once.
#include <gtest/gtest.h>

#include <numeric>

#include "src/plan/collectives.h"
#include "src/sim/sim_comm.h"
#include "src/sim/timeline.h"
#include "tests/sim/plan_cases.h"

namespace gpt::sim {
namespace {

double sum(const Timeline& t) {
  const auto& p = t.phases();
  return std::accumulate(p.begin(), p.end(), 0.0);
}
double at(const Timeline& t, Phase p) { return t.phases()[(int)p]; }

TEST(Timeline, TheCpuBackendRunsEverythingOnTheHost) {
  Timeline t(false);
  t.compute(2, Phase::forward);
  const uint64_t c = t.copy(1, false);  // a memcpy, at once
  EXPECT_DOUBLE_EQ(t.copy_end(c), 3);
  t.host(0.5, Phase::optimizer);
  t.host_waits(5, Phase::exposed_comm);  // a blocking collective
  t.synchronize();
  EXPECT_DOUBLE_EQ(t.host_time(), 5);
  EXPECT_DOUBLE_EQ(at(t, Phase::forward), 2);
  EXPECT_DOUBLE_EQ(at(t, Phase::copies), 1);
  EXPECT_DOUBLE_EQ(at(t, Phase::optimizer), 0.5);
  EXPECT_DOUBLE_EQ(at(t, Phase::exposed_comm), 1.5);
  EXPECT_DOUBLE_EQ(sum(t), t.host_time());
}

TEST(Timeline, AGpuStreamRunsBesideTheHostAndWaitsChargeTheirCause) {
  Timeline t(true);
  t.compute(2, Phase::forward);       // [0, 2] while the host stays at 0
  EXPECT_DOUBLE_EQ(t.host_time(), 0);
  const uint64_t c = t.copy(1, false);  // after the queued compute: [2, 3]
  EXPECT_DOUBLE_EQ(t.copy_end(c), 3);
  t.compute_waits(t.copy_end(c), Phase::copies);  // the stream idles [2, 3]
  const int ch = t.add_channel();
  double s = 0;
  const double end = t.on_channel(ch, 4, t.now(), &s);  // a collective ready at 3: [3, 7]
  EXPECT_DOUBLE_EQ(s, 3);
  t.compute(1, Phase::backward);      // [3, 4], overlapping the collective
  t.compute_waits(end, Phase::exposed_comm);  // [4, 7] exposed
  t.host(10, Phase::optimizer);       // host work [0, 10]: the stream idles [7, 10] for it
  t.compute(1, Phase::optimizer);     // [10, 11]
  t.synchronize();
  EXPECT_DOUBLE_EQ(t.host_time(), 11);
  EXPECT_DOUBLE_EQ(at(t, Phase::copies), 1);
  EXPECT_DOUBLE_EQ(at(t, Phase::exposed_comm), 3);
  EXPECT_DOUBLE_EQ(at(t, Phase::optimizer), 3 + 1);  // the host's share of the idle time, and the op
  EXPECT_DOUBLE_EQ(sum(t), 11);
}

TEST(Timeline, TheFinalSyncWaitsForCopiesAsHostWait) {
  Timeline t(true);
  t.compute(1, Phase::forward);
  t.copy(5, false);  // [1, 6], nobody waits until the end
  t.synchronize();
  EXPECT_DOUBLE_EQ(t.host_time(), 6);
  EXPECT_DOUBLE_EQ(at(t, Phase::host_wait), 5);
  EXPECT_DOUBLE_EQ(sum(t), 6);
  t.restart();
  EXPECT_DOUBLE_EQ(t.host_time(), 0);
  EXPECT_DOUBLE_EQ(sum(t), 0);
}

// A stretch is the model's compute (forward, recompute, backward; not the engine's ops) between two waits marked
// at once; the first and the unfinished last count together (a next micro-step's first joins the last).
TEST(Timeline, AStretchIsTheModelsComputeBetweenTwoWaitsAtOnce) {
  Timeline t(true);
  EXPECT_DOUBLE_EQ(t.longest_stretch(), 0);
  t.compute(1, Phase::forward);
  t.waited_at_once();                 // first: 1
  t.compute(2, Phase::forward);
  t.compute(5, Phase::engine);        // not the model's
  t.compute(3, Phase::recompute);
  t.waited_at_once();                 // 2 + 3 = 5
  t.compute(3, Phase::backward);      // last: 3, with the first 1 + 3 = 4
  EXPECT_DOUBLE_EQ(t.longest_stretch(), 5);
  t.compute(2, Phase::backward);      // last: 5, with the first 6
  EXPECT_DOUBLE_EQ(t.longest_stretch(), 6);
  t.restart();
  t.compute(4, Phase::forward);
  t.compute(1, Phase::optimizer);
  EXPECT_DOUBLE_EQ(t.longest_stretch(), 4);  // no wait: all of it
}

// The simulated communicators mark a wait at once where no op was queued on the compute stream between the
// collective's issue and its wait, and it takes time; a collective waited after the compute it overlaps is
// no such wait.
TEST(Timeline, TheSimulatedCommunicatorsMarkOnlyWaitsAtOnce) {
  const HardwareSpec hw = parse_hardware(test::gpu_file(2), "gpu2.json");
  const NetworkModel net(hw, 2);
  Timeline t(true);
  std::unique_ptr<Communicator> world = make_sim_world(2, 2, t, &net, /*overlap=*/true, /*stream_ordered=*/true);
  std::vector<float> x(1024);
  t.compute(1, Phase::forward);
  world->all_reduce_async(x.data(), x.size(), DType::F32, ReduceOp::sum)->wait();  // at once
  t.compute(2, Phase::forward);
  WorkPtr w = world->all_reduce_async(x.data(), x.size(), DType::F32, ReduceOp::sum);
  t.compute(4, Phase::forward);  // overlaps it
  w->wait();
  t.compute(3, Phase::backward);
  world->all_reduce_async(x.data(), x.size(), DType::F32, ReduceOp::sum)->wait();  // at once
  t.compute(1, Phase::backward);
  EXPECT_DOUBLE_EQ(t.longest_stretch(), 9);  // 2 + 4 + 3: the second wait split nothing (first + last: 2)
  EXPECT_EQ(sim_timed_calls(*world), 3);
  std::unique_ptr<Communicator> one = world->split_contiguous(1);
  t.compute(1, Phase::backward);
  one->all_reduce_async(x.data(), x.size(), DType::F32, ReduceOp::sum)->wait();  // one rank: takes no time
  t.compute(7, Phase::backward);
  EXPECT_EQ(sim_timed_calls(*world), 3);
  EXPECT_DOUBLE_EQ(t.longest_stretch(), 10);  // the first 1 and the last 1 + 1 + 7: that wait split nothing
}

}  // namespace
}  // namespace gpt::sim
