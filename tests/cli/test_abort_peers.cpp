// run_or_abort_peers (src/cli/abort_peers.h): with peers, a failing rank prints its error and aborts the job
// before its stack unwinds (unwinding may wait for device work behind collectives the peers never join); one
// rank unwinds as usual, the error reaching main() to be printed there.
#include <gtest/gtest.h>

#include <memory>
#include <stdexcept>
#include <string>

#include "src/cli/abort_peers.h"

namespace gpt::test {
namespace {

// A world of `n` ranks whose abort records its code and throws instead of ending the process; nothing else.
struct AbortRecorder final : Communicator {
  explicit AbortRecorder(int n) : n(n) {}
  struct Aborted {};
  int n, aborted_with = -1;
  std::string name() const override { return "abort recorder"; }
  int rank() const override { return 0; }
  int world() const override { return n; }
  int local_rank() const override { return 0; }
  int local_size() const override { return n; }
  WorkPtr all_gather_async(void*, const void*, size_t, DType) override { throw std::logic_error("unused"); }
  WorkPtr reduce_scatter_async(void*, const void*, size_t, DType, ReduceOp) override { throw std::logic_error("unused"); }
  WorkPtr all_reduce_async(void*, size_t, DType, ReduceOp) override { throw std::logic_error("unused"); }
  void broadcast(void*, size_t, int) override {}
  void barrier() override {}
  double all_reduce_scalar(double x, ReduceOp) override { return x; }
  double all_reduce_max(double x) override { return x; }
  std::unique_ptr<Communicator> split(int, int) override { throw std::logic_error("unused"); }
  bool* watched = nullptr;  // read when abort is called
  bool watched_at_abort = false;
  void abort(int code) override {
    aborted_with = code;
    if (watched) watched_at_abort = *watched;
    throw Aborted{};
  }
};

// Sets its flag when destroyed: a stand-in for the Trainer, whose buffers' frees wait for the device.
struct Trainerish {
  bool& destroyed;
  ~Trainerish() { destroyed = true; }
};

TEST(AbortPeers, WithPeersTheErrorIsPrintedAndTheJobAbortedBeforeUnwinding) {
  AbortRecorder world(2);
  bool destroyed = false;
  world.watched = &destroyed;
  testing::internal::CaptureStderr();
  {
    std::unique_ptr<Trainerish> held;  // as cmd_train holds its Trainer: outside the function that fails
    EXPECT_THROW(run_or_abort_peers(world,
                                    [&] {
                                      held.reset(new Trainerish{destroyed});
                                      fail("rank 0: the device is gone");
                                    }),
                 AbortRecorder::Aborted);
  }
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_EQ(world.aborted_with, 1);
  EXPECT_EQ(err, "error: rank 0: the device is gone\n");
  EXPECT_FALSE(world.watched_at_abort) << "the held object was destroyed before the job was aborted";
  EXPECT_TRUE(destroyed);
}

TEST(AbortPeers, OneRankUnwindsAndLeavesTheErrorToMain) {
  AbortRecorder world(1);
  testing::internal::CaptureStderr();
  EXPECT_THROW(run_or_abort_peers(world, [] { fail("disk full"); }), Error);
  EXPECT_EQ(testing::internal::GetCapturedStderr(), "");
  EXPECT_EQ(world.aborted_with, -1);
  run_or_abort_peers(world, [] {});  // no error: nothing happens
  EXPECT_EQ(world.aborted_with, -1);
}

}  // namespace
}  // namespace gpt::test
