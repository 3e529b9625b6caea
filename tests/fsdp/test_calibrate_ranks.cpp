// `mpirun -n R gpt bench --calibrate` with real ranks: the file gets a profile for R ranks and, at R > 1, the
// collective fits at R ranks, the two bf16 reductions among them (MPI sums bf16 in its own op, so they are
// timed apart), each with a positive bandwidth; the file parses back. Quick mode: a few seconds a rank count.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "src/cli/calibrate.h"
#include "src/dist/collective_check.h"
#include "src/plan/hardware.h"
#include "tests/fsdp/mpi_world.h"

namespace gpt::test {
namespace {

TEST(CalibrateRanks, WritesTheProfileAndEveryCollectiveFitForThisRankCount) {
  Communicator& w = world();
  const std::string dir = shared_dir("calibrate");
  setenv("GPT_CACHE_DIR", dir.c_str(), 1);  // the MFU peak it caches stays out of the user's cache
  const std::string file = dir + "/hw.json";
  collective_check(w, "calibrate", [&] { run_calibration(w, file, /*quick=*/true, /*json=*/true); });
  w.barrier();
  const HardwareSpec h = load_hardware(file);
  bool profile = false;
  for (const ComputeProfile& p : h.profiles) profile = profile || p.ranks == w.world();
  EXPECT_TRUE(profile) << "no profile for " << w.world() << " ranks";
  const MeasuredNetwork* m = nullptr;
  for (const MeasuredNetwork& x : h.measured)
    if (x.ranks == w.world()) m = &x;
  if (w.world() == 1) {
    EXPECT_EQ(m, nullptr);
    return;
  }
  ASSERT_NE(m, nullptr) << "no collective fits at " << w.world() << " ranks";
  EXPECT_TRUE(m->has_bf16);
  for (const Link* l : {&m->links.all_gather, &m->links.reduce_scatter, &m->links.all_reduce, &m->reduce_scatter_bf16,
                        &m->all_reduce_bf16}) {
    EXPECT_GT(l->bandwidth, 0);
    EXPECT_GE(l->latency, 0);
  }
}

}  // namespace
}  // namespace gpt::test
