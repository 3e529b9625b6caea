// The single-process communicator and the communication ledger on their own. Each rank of a test_fsdp run
// makes its own single communicator, so these run (identically) at every world size. The ring volume
// helpers are checked against hand-computed literals.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <thread>
#include <vector>

#include "src/core/check.h"
#include "src/dist/comm_volume.h"
#include "src/dist/comm_world.h"

namespace gpt {
namespace {

TEST(CommSingle, Identity) {
  auto c = make_single_communicator();
  EXPECT_EQ(c->name(), "single");
  EXPECT_EQ(c->rank(), 0);
  EXPECT_EQ(c->world(), 1);
  EXPECT_EQ(c->local_rank(), 0);
  EXPECT_EQ(c->local_size(), 1);
  EXPECT_EQ(c->all_reduce_scalar(2.5, ReduceOp::sum), 2.5);
  EXPECT_EQ(c->all_reduce_scalar(2.5, ReduceOp::avg), 2.5);
  EXPECT_EQ(c->all_reduce_max(-3.0), -3.0);
  c->barrier();
}

TEST(CommSingle, CollectivesCopyOrKeep) {
  auto c = make_single_communicator();
  std::vector<float> in = {1.5f, -2.0f, 3.25f}, out(3, NAN);  // (3), (3)
  c->all_gather(out.data(), in.data(), 3, DType::F32);
  EXPECT_EQ(out, in);
  std::fill(out.begin(), out.end(), NAN);
  c->reduce_scatter(out.data(), in.data(), 3, DType::F32, ReduceOp::avg);
  EXPECT_EQ(out, in);
  std::vector<uint16_t> h_in = {0x3f80, 0x4000}, h_out(2, 0);  // (2) bf16 words
  c->reduce_scatter(h_out.data(), h_in.data(), 2, DType::BF16, ReduceOp::sum);
  EXPECT_EQ(h_out, h_in);
  std::vector<float> buf = in;
  c->all_gather(buf.data(), buf.data(), 3, DType::F32);  // in place: in == out + 0*count
  c->all_reduce(buf.data(), 3, DType::F32, ReduceOp::avg);
  WorkPtr work = c->all_reduce_async(buf.data(), 3, DType::F32, ReduceOp::sum);
  work->wait();
  EXPECT_EQ(buf, in);
  std::vector<uint8_t> bytes = {1, 2, 3};
  c->broadcast(bytes.data(), bytes.size(), 0);
  EXPECT_EQ(bytes, (std::vector<uint8_t>{1, 2, 3}));
  EXPECT_THROW(c->broadcast(bytes.data(), bytes.size(), 1), Error);
}

TEST(CommSingle, LedgerCountsCallsAtZeroBytes) {
  auto c = make_single_communicator();
  std::vector<float> a(8, 1.0f), b(8);  // (8), (8)
  c->all_gather(b.data(), a.data(), 8, DType::F32);
  c->reduce_scatter(b.data(), a.data(), 8, DType::F32, ReduceOp::sum);
  c->all_reduce(a.data(), 8, DType::F32, ReduceOp::sum);
  c->all_reduce(a.data(), 8, DType::F32, ReduceOp::sum);
  c->broadcast(a.data(), 32, 0);
  CommCounters t = c->ledger().total();
  EXPECT_EQ(t.total_sent(), 0);
  EXPECT_EQ(t.calls[int(CollKind::all_gather)], 1);
  EXPECT_EQ(t.calls[int(CollKind::reduce_scatter)], 1);
  EXPECT_EQ(t.calls[int(CollKind::all_reduce)], 2);
  EXPECT_EQ(t.calls[int(CollKind::broadcast)], 1);
  EXPECT_EQ(c->ledger().in_flight(), 0);
}

TEST(CommSingle, SplitGivesAnotherSingle) {
  auto c = make_single_communicator();
  auto s = c->split(3, 7);
  EXPECT_EQ(s->name(), "single");
  EXPECT_EQ(s->world(), 1);
  EXPECT_EQ(s->rank(), 0);
  EXPECT_THROW(c->split(-1, 0), Error);
}

TEST(CommLedger, StepAndTotal) {
  CommLedger l;
  l.record(CollKind::all_gather, 100);
  l.record(CollKind::all_gather, 20);
  l.record(CollKind::reduce_scatter, 7);
  EXPECT_EQ(l.step().bytes_sent[int(CollKind::all_gather)], 120);
  EXPECT_EQ(l.step().calls[int(CollKind::all_gather)], 2);
  EXPECT_EQ(l.step().total_sent(), 127);
  l.begin_step();
  EXPECT_EQ(l.step().total_sent(), 0);
  EXPECT_EQ(l.step().calls[int(CollKind::all_gather)], 0);
  l.record(CollKind::all_reduce, 0);
  EXPECT_EQ(l.step().calls[int(CollKind::all_reduce)], 1);
  EXPECT_EQ(l.total().total_sent(), 127);
  EXPECT_EQ(l.total().calls[int(CollKind::all_gather)], 2);
  EXPECT_EQ(l.total().calls[int(CollKind::all_reduce)], 1);
  EXPECT_THROW(l.record(CollKind::broadcast, -1), Error);
}

TEST(CommLedger, InFlightAndThreads) {
  CommLedger l;
  l.add_in_flight(64);
  l.add_in_flight(36);
  EXPECT_EQ(l.in_flight(), 100);
  l.add_in_flight(-100);
  EXPECT_EQ(l.in_flight(), 0);
  EXPECT_THROW(l.add_in_flight(-1), Error);
  CommLedger m;
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&m] {
      for (int i = 0; i < 1000; ++i) m.record(CollKind::broadcast, 3);
    });
  for (auto& th : threads) th.join();
  EXPECT_EQ(m.total().bytes_sent[int(CollKind::broadcast)], 12000);
  EXPECT_EQ(m.total().calls[int(CollKind::broadcast)], 4000);
}

TEST(CommLedger, KindNames) {
  EXPECT_STREQ(collkind_name(CollKind::all_gather), "all_gather");
  EXPECT_STREQ(collkind_name(CollKind::reduce_scatter), "reduce_scatter");
  EXPECT_STREQ(collkind_name(CollKind::all_reduce), "all_reduce");
  EXPECT_STREQ(collkind_name(CollKind::broadcast), "broadcast");
  EXPECT_THROW(collkind_name(CollKind::count), Error);
}

TEST(CommVolume, RingFormulas) {
  EXPECT_EQ(ring_all_gather_bytes(10, DType::F32, 4), 120);      // 10*4*3
  EXPECT_EQ(ring_all_gather_bytes(10, DType::BF16, 4), 60);      // 10*2*3
  EXPECT_EQ(ring_reduce_scatter_bytes(5, DType::F32, 3), 40);    // 5*4*2
  EXPECT_EQ(ring_all_reduce_bytes(12, DType::F32, 4), 72);       // 2*48*3/4
  EXPECT_EQ(ring_all_reduce_bytes(10, DType::F32, 3), 53);       // 2*40*2/3 = 53.33, rounded down
  EXPECT_EQ(ring_broadcast_bytes(100, 4), 75);
  EXPECT_EQ(ring_broadcast_bytes(10, 3), 6);                     // 6.67, rounded down
  EXPECT_EQ(ring_all_gather_bytes(1000, DType::F32, 1), 0);
  EXPECT_EQ(ring_all_reduce_bytes(1000, DType::F32, 1), 0);
  EXPECT_EQ(ring_broadcast_bytes(1000, 1), 0);
  EXPECT_EQ(ring_all_gather_bytes(size_t(1) << 31, DType::F32, 8), int64_t(7) << 33);  // no 32-bit overflow
}

}  // namespace
}  // namespace gpt
