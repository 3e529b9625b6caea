// The simulated machine's clock (src/sim/timeline.h), worked by hand: on the cpu backend everything runs on
// the host one after another; on a GPU the compute stream runs beside the host, waits charge its idle time
// to their cause, a copy starts after the work queued before it, and the phases sum to the step.
#include <gtest/gtest.h>

#include <numeric>

#include "src/sim/timeline.h"

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

}  // namespace
}  // namespace gpt::sim
