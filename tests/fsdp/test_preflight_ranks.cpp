// Pre-flight agreement across real ranks: when the run fits on some ranks and not on one, every rank stops
// with it (no rank goes on to allocate and then waits forever in a collective): the short rank with its
// own verdict, the others naming it.
#include <gtest/gtest.h>

#include "src/dist/collective_check.h"
#include "src/plan/preflight.h"
#include "tests/common/error_of.h"
#include "tests/common/tiny_config.h"
#include "tests/fsdp/mpi_world.h"

namespace gpt::test {
namespace {

TEST(PreflightRanks, OneShortRankStopsEveryRank) {
  Communicator& w = world();
  PreflightSpec spec;
  spec.run.cfg = tiny_config(2, 2, 64, 32, 97);
  spec.run.world = w.world();
  spec.run.B = 2;
  spec.run.T = 32;
  MemoryAvailable avail;
  avail.host_source = "test";
  const int64_t need = preflight_need(spec, avail).host;
  avail.host = w.rank() == 0 ? need - 1 : need;  // rank 0 is one byte short
  const std::string msg = error_of([&] { collective_check(w, "pre-flight", [&] { preflight_check(spec, avail, "train"); }); });
  if (w.rank() == 0) {
    EXPECT_NE(msg.find("train: this run does not fit in memory"), std::string::npos) << msg;
  } else {
    EXPECT_EQ(msg, "pre-flight: failed on rank 0 (see its message)");
  }
  avail.host = need;  // and when every rank has room, none stops
  EXPECT_EQ(error_of([&] { collective_check(w, "pre-flight", [&] { preflight_check(spec, avail, "train"); }); }),
            "(no error)");
}

}  // namespace
}  // namespace gpt::test
