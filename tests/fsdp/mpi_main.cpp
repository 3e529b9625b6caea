// Entry point of test_fsdp. It makes the world communicator (initialising MPI under mpiexec), runs every
// test on every rank, and prints gtest's report on rank 0 only; other ranks print just their failures,
// tagged with the rank. The exit status is the worst over all ranks, so one failing rank fails the run.
#include <gtest/gtest.h>

#include <cstdio>
#include <exception>

#include "src/core/check.h"
#include "tests/fsdp/mpi_world.h"

namespace gpt::test {
namespace {
Communicator* g_world = nullptr;
}  // namespace

Communicator& world() {
  GPT_CHECK(g_world, "test_fsdp: the world communicator is used outside main's RUN_ALL_TESTS");
  return *g_world;
}

}  // namespace gpt::test

namespace {

// Replaces gtest's printer on ranks other than 0: silent except for failed assertions.
class RankFailurePrinter : public ::testing::EmptyTestEventListener {
 public:
  explicit RankFailurePrinter(int rank) : rank_(rank) {}
  void OnTestPartResult(const ::testing::TestPartResult& r) override {
    if (!r.failed()) return;
    std::fprintf(stderr, "[rank %d] %s:%d: Failure\n%s\n", rank_, r.file_name() ? r.file_name() : "?",
                 r.line_number(), r.summary());
  }

 private:
  int rank_;
};

int run_all(gpt::Communicator& world) {
  if (world.rank() != 0) {
    auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
    listeners.Append(new RankFailurePrinter(world.rank()));
  }
  const int local = RUN_ALL_TESTS();
  const double worst = world.all_reduce_max(local != 0 ? 1.0 : 0.0);
  if (world.rank() == 0 && worst > 0 && local == 0)
    std::fprintf(stderr, "test_fsdp: a test failed on another rank (see the [rank r] lines)\n");
  return worst > 0 ? 1 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  int code = 1;
  try {
    auto world = gpt::make_world_communicator("auto");
    gpt::test::g_world = world.get();
    code = run_all(*world);
    gpt::test::g_world = nullptr;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    code = 1;
  }
  gpt::finalize_communication();
  return code;
}
