// The world communicator under mpiexec at 1..4 ranks: every collective checked on every rank against
// values computed here in double precision from the rank-dependent inputs of all ranks (so a wrong slice,
// a missing rank or a swapped order is caught), the ledger against the ring formulas written out below,
// and the error paths. Collectives sit between EXPECT_* only, so a failing rank never strands the others.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <vector>

#include "src/core/check.h"
#include "src/dist/comm_world.h"
#include "tests/fsdp/comm_test_values.h"
#include "tests/fsdp/mpi_world.h"
#ifdef GPT_WITH_MPI
#include "src/dist/mpi_check.h"
#endif

namespace gpt {
namespace {

using test::world;

using test::ag_bytes;
using test::ar_bytes;
using test::val;

TEST(Comm, WorldMatchesLauncher) {
  Communicator& w = world();
  EXPECT_GE(w.rank(), 0);
  EXPECT_LT(w.rank(), w.world());
  int launched = launcher_world_size();
  if (launched > 0) {
    EXPECT_EQ(w.name(), "mpi");
    EXPECT_EQ(w.world(), launched);
  }
}

// ctest starts every rank on this one node, so each rank's node-local rank is its world rank; the same
// holds in a sub-communicator (split computes it again over the sub-group's own node split).
TEST(Comm, LocalRankIsTheRankOnOneNode) {
  Communicator& w = world();
  EXPECT_EQ(w.local_rank(), w.rank());
  EXPECT_EQ(w.local_size(), w.world());
  std::unique_ptr<Communicator> odd_even = w.split(w.rank() % 2, w.rank());
  EXPECT_EQ(odd_even->local_rank(), odd_even->rank());
  EXPECT_EQ(odd_even->rank(), w.rank() / 2);
}

TEST(Comm, AllGather) {
  Communicator& w = world();
  const int n = w.world(), r = w.rank();
  const size_t count = 5;
  std::vector<float> in(count), out(n * count, NAN);  // (count), (N*count)
  for (size_t i = 0; i < count; ++i) in[i] = val(r, i);
  w.all_gather(out.data(), in.data(), count, DType::F32);
  for (int q = 0; q < n; ++q)
    for (size_t i = 0; i < count; ++i) EXPECT_EQ(out[q * count + i], val(q, i)) << "rank " << q << " i " << i;
}

TEST(Comm, AllGatherInPlace) {
  Communicator& w = world();
  const int n = w.world(), r = w.rank();
  const size_t count = 7;
  std::vector<float> buf(n * count, -1.0f);  // (N*count), only this rank's slice filled
  for (size_t i = 0; i < count; ++i) buf[r * count + i] = val(r, i);
  w.all_gather(buf.data(), buf.data() + r * count, count, DType::F32);
  for (int q = 0; q < n; ++q)
    for (size_t i = 0; i < count; ++i) EXPECT_EQ(buf[q * count + i], val(q, i)) << "rank " << q << " i " << i;
}

TEST(Comm, AllGatherBf16MovesRawWords) {
  Communicator& w = world();
  const int n = w.world(), r = w.rank();
  const size_t count = 3;
  std::vector<uint16_t> in(count), out(n * count, 0xffff);  // (count), (N*count) bf16 bit patterns
  for (size_t i = 0; i < count; ++i) in[i] = static_cast<uint16_t>(0x3f80 + 16 * r + i);
  w.all_gather(out.data(), in.data(), count, DType::BF16);
  for (int q = 0; q < n; ++q)
    for (size_t i = 0; i < count; ++i) EXPECT_EQ(out[q * count + i], 0x3f80 + 16 * q + i);
}

void check_reduce_scatter(ReduceOp op) {
  Communicator& w = world();
  const int n = w.world(), r = w.rank();
  const size_t count = 6;
  std::vector<float> in(n * count), out(count, NAN);  // (N*count), (count)
  for (size_t j = 0; j < in.size(); ++j) in[j] = val(r, j);
  w.reduce_scatter(out.data(), in.data(), count, DType::F32, op);
  for (size_t i = 0; i < count; ++i) {
    double sum = 0;
    for (int q = 0; q < n; ++q) sum += val(q, r * count + i);
    double want = op == ReduceOp::avg ? sum / n : sum;
    EXPECT_NEAR(out[i], want, 1e-6 * std::fabs(want)) << "i " << i;
  }
}

TEST(Comm, ReduceScatterSum) { check_reduce_scatter(ReduceOp::sum); }
TEST(Comm, ReduceScatterAvg) { check_reduce_scatter(ReduceOp::avg); }

void check_all_reduce(ReduceOp op) {
  Communicator& w = world();
  const int n = w.world(), r = w.rank();
  const size_t count = 1001;
  std::vector<float> buf(count);  // (count)
  for (size_t i = 0; i < count; ++i) buf[i] = (r + 1.0f) * static_cast<float>(i % 97) - 0.25f * r;
  w.all_reduce(buf.data(), count, DType::F32, op);
  for (size_t i = 0; i < count; ++i) {
    double sum = 0;
    for (int q = 0; q < n; ++q) sum += (q + 1.0) * (i % 97) - 0.25 * q;
    double want = op == ReduceOp::avg ? sum / n : sum;
    EXPECT_NEAR(buf[i], want, 1e-6 * std::fabs(want) + 1e-7) << "i " << i;
  }
}

TEST(Comm, AllReduceSum) { check_all_reduce(ReduceOp::sum); }
TEST(Comm, AllReduceAvg) { check_all_reduce(ReduceOp::avg); }

// max (the vocab-parallel loss's row maxima): exact, whichever rank holds it, negative values and -inf included.
TEST(Comm, AllReduceMax) {
  Communicator& w = world();
  const int n = w.world(), r = w.rank();
  const size_t count = 257;
  std::vector<float> buf(count);  // (count)
  for (size_t i = 0; i < count; ++i) buf[i] = i % 7 == 0 ? -INFINITY : -1.5f * (float)((r + i) % n) - (float)i;
  w.all_reduce(buf.data(), count, DType::F32, ReduceOp::max);
  for (size_t i = 0; i < count; ++i) {
    float want = -INFINITY;
    for (int q = 0; q < n; ++q) want = std::max(want, i % 7 == 0 ? -INFINITY : -1.5f * (float)((q + i) % n) - (float)i);
    EXPECT_EQ(buf[i], want) << "i " << i;
  }
  EXPECT_DOUBLE_EQ(w.all_reduce_scalar(-2.0 * r, ReduceOp::max), 0.0);
}

TEST(Comm, TwoCollectivesInFlight) {
  Communicator& w = world();
  const int n = w.world(), r = w.rank();
  const size_t ca = 4, cb = 8;
  std::vector<float> a_in(ca), a_out(n * ca, NAN), b(cb);  // (ca), (N*ca), (cb)
  for (size_t i = 0; i < ca; ++i) a_in[i] = val(r, i);
  for (size_t i = 0; i < cb; ++i) b[i] = static_cast<float>(r + i);
  const int64_t before = w.ledger().in_flight();
  EXPECT_EQ(before, 0);
  WorkPtr wa = w.all_gather_async(a_out.data(), a_in.data(), ca, DType::F32);
  EXPECT_EQ(w.ledger().in_flight(), ag_bytes(ca, 4, n));
  WorkPtr wb = w.all_reduce_async(b.data(), cb, DType::F32, ReduceOp::sum);
  EXPECT_EQ(w.ledger().in_flight(), ag_bytes(ca, 4, n) + ar_bytes(cb, 4, n));
  if (n > 1) {
    EXPECT_GT(w.ledger().in_flight(), 0);
  }
  wb->wait();  // the second one first: completion order is free
  EXPECT_EQ(w.ledger().in_flight(), ag_bytes(ca, 4, n));
  wa->wait();
  wa->wait();  // a second wait is a no-op
  EXPECT_EQ(w.ledger().in_flight(), 0);
  for (size_t i = 0; i < cb; ++i) EXPECT_EQ(b[i], n * (n - 1) / 2.0 + n * static_cast<double>(i));
  for (int q = 0; q < n; ++q)
    for (size_t i = 0; i < ca; ++i) EXPECT_EQ(a_out[q * ca + i], val(q, i));
}

TEST(Comm, DroppedWorkWaitsInDestructor) {
  Communicator& w = world();
  const int n = w.world(), r = w.rank();
  std::vector<float> buf(3, static_cast<float>(r + 1));  // (3)
  { WorkPtr work = w.all_reduce_async(buf.data(), buf.size(), DType::F32, ReduceOp::avg); }
  EXPECT_EQ(w.ledger().in_flight(), 0);
  for (float x : buf) EXPECT_FLOAT_EQ(x, (n + 1) / 2.0f);
}

TEST(Comm, BroadcastFromEveryRoot) {
  Communicator& w = world();
  const int n = w.world(), r = w.rank();
  for (int root = 0; root < n; ++root) {
    std::vector<uint8_t> buf(37, 0);  // (37 bytes)
    if (r == root)
      for (size_t i = 0; i < buf.size(); ++i) buf[i] = static_cast<uint8_t>(7 * root + i);
    w.broadcast(buf.data(), buf.size(), root);
    for (size_t i = 0; i < buf.size(); ++i) EXPECT_EQ(buf[i], static_cast<uint8_t>(7 * root + i)) << root;
  }
}

TEST(Comm, ScalarReductions) {
  Communicator& w = world();
  const int n = w.world(), r = w.rank();
  auto sub = w.split(0, r);  // fresh ledger: scalars must not count as model traffic
  EXPECT_DOUBLE_EQ(sub->all_reduce_scalar(r + 1.0, ReduceOp::sum), n * (n + 1) / 2.0);
  EXPECT_DOUBLE_EQ(sub->all_reduce_scalar(r + 1.0, ReduceOp::avg), (n + 1) / 2.0);
  EXPECT_DOUBLE_EQ(sub->all_reduce_max(1.5 * r), 1.5 * (n - 1));
  EXPECT_DOUBLE_EQ(sub->all_reduce_max(-1.5 * r), 0.0);
  EXPECT_EQ(sub->ledger().total().total_sent(), 0);
  for (int k = 0; k < kCollKinds; ++k) EXPECT_EQ(sub->ledger().total().calls[k], 0);
  sub->barrier();
}

// Hybrid groups: color = rank % 2. Group g holds global ranks g, g+2, ...; key orders them.
void check_group(Communicator& g, int color, bool reversed) {
  const int n = world().world(), r = world().rank();
  const int gn = (n - color + 1) / 2;  // ranks with this parity
  const int grank = reversed ? gn - 1 - r / 2 : r / 2;
  EXPECT_EQ(g.world(), gn);
  EXPECT_EQ(g.rank(), grank);
  auto global_of = [&](int k) { return color + 2 * (reversed ? gn - 1 - k : k); };
  const size_t count = 3;
  std::vector<float> in(count), out(gn * count, NAN);  // (count), (gn*count)
  for (size_t i = 0; i < count; ++i) in[i] = val(r, i);
  g.all_gather(out.data(), in.data(), count, DType::F32);
  for (int k = 0; k < gn; ++k)
    for (size_t i = 0; i < count; ++i) EXPECT_EQ(out[k * count + i], val(global_of(k), i));
  std::vector<float> sum(count);  // (count)
  for (size_t i = 0; i < count; ++i) sum[i] = val(r, i);
  g.all_reduce(sum.data(), count, DType::F32, ReduceOp::sum);
  for (size_t i = 0; i < count; ++i) {
    double want = 0;
    for (int k = 0; k < gn; ++k) want += val(global_of(k), i);
    EXPECT_EQ(sum[i], want);
  }
  EXPECT_EQ(g.ledger().total().bytes_sent[int(CollKind::all_gather)], ag_bytes(count, 4, gn));
  EXPECT_EQ(g.ledger().total().bytes_sent[int(CollKind::all_reduce)], ar_bytes(count, 4, gn));
  EXPECT_DOUBLE_EQ(g.all_reduce_scalar(1.0, ReduceOp::sum), gn);
}

TEST(Comm, SplitIntoParityGroups) {
  Communicator& w = world();
  const int r = w.rank();
  auto g = w.split(r % 2, r);
  check_group(*g, r % 2, false);
  auto rev = w.split(r % 2, -r);
  check_group(*rev, r % 2, true);
  auto nested = g->split(0, g->rank());  // a split of a split is the same group again
  EXPECT_EQ(nested->world(), g->world());
  EXPECT_EQ(nested->rank(), g->rank());
}

TEST(Comm, LedgerMatchesRingFormulas) {
  Communicator& w = world();
  const int n = w.world(), r = w.rank();
  auto c = w.split(0, r);  // same ranks, fresh ledger
  const int64_t c_ag = 6, c_rs = 7, c_ar = 10, bcast = 9;
  std::vector<float> ag_in(c_ag, 1.0f), ag_out(n * c_ag), rs_in(n * c_rs, 1.0f), rs_out(c_rs), ar(c_ar, 1.0f);
  std::vector<uint8_t> bytes(bcast, 3);
  c->all_gather(ag_out.data(), ag_in.data(), c_ag, DType::F32);
  c->reduce_scatter(rs_out.data(), rs_in.data(), c_rs, DType::F32, ReduceOp::avg);
  c->all_reduce(ar.data(), c_ar, DType::F32, ReduceOp::sum);
  c->broadcast(bytes.data(), bcast, 0);
  CommCounters t = c->ledger().total();
  EXPECT_EQ(t.bytes_sent[int(CollKind::all_gather)], c_ag * 4 * (n - 1));
  EXPECT_EQ(t.bytes_sent[int(CollKind::reduce_scatter)], c_rs * 4 * (n - 1));
  EXPECT_EQ(t.bytes_sent[int(CollKind::all_reduce)], 2 * c_ar * 4 * (n - 1) / n);  // floor when N ∤ 80(N-1)
  EXPECT_EQ(t.bytes_sent[int(CollKind::broadcast)], bcast * (n - 1) / n);
  for (int k = 0; k < kCollKinds; ++k) EXPECT_EQ(t.calls[k], 1) << collkind_name(CollKind(k));
  EXPECT_EQ(t.total_sent(), t.bytes_sent[0] + t.bytes_sent[1] + t.bytes_sent[2] + t.bytes_sent[3]);
  EXPECT_EQ(c->ledger().step().total_sent(), t.total_sent());
  c->ledger().begin_step();
  c->all_gather(ag_out.data(), ag_in.data(), c_ag, DType::F32);
  EXPECT_EQ(c->ledger().step().total_sent(), c_ag * 4 * (n - 1));
  EXPECT_EQ(c->ledger().step().calls[int(CollKind::all_gather)], 1);
  EXPECT_EQ(c->ledger().total().calls[int(CollKind::all_gather)], 2);
  EXPECT_EQ(c->ledger().in_flight(), 0);
}

// ZeRO / FSDP volumes (arXiv 1910.02054): for Ψ parameters padded to a multiple of N, FULL_SHARD moves
// 3Ψ(N-1)/N elements per rank and step (two all-gathers and one reduce-scatter), DDP 2Ψ(N-1)/N.
TEST(Comm, FsdpAndDdpVolumes) {
  Communicator& w = world();
  const int n = w.world(), r = w.rank();
  const int64_t psi = 12 * n;  // padded parameter count
  const int64_t shard = psi / n;
  auto c = w.split(0, r);
  std::vector<float> full(psi, 1.0f), part(shard, 1.0f);  // (Ψ), (Ψ/N)
  c->all_gather(full.data(), full.data() + r * shard, shard, DType::F32);  // forward
  c->all_gather(full.data(), full.data() + r * shard, shard, DType::F32);  // backward
  c->reduce_scatter(part.data(), full.data(), shard, DType::F32, ReduceOp::avg);
  EXPECT_EQ(c->ledger().step().total_sent() * n, 3 * psi * 4 * (n - 1));
  c->ledger().begin_step();
  c->all_reduce(full.data(), psi, DType::F32, ReduceOp::avg);
  EXPECT_EQ(c->ledger().step().total_sent() * n, 2 * psi * 4 * (n - 1));
}

TEST(Comm, ErrorsAreMessages) {
  Communicator& w = world();
  const int n = w.world(), r = w.rank();
  std::vector<float> buf(4 * n);  // (4N)
  EXPECT_THROW(w.broadcast(buf.data(), 4, n), Error);
  EXPECT_THROW(w.broadcast(buf.data(), 4, -1), Error);
  EXPECT_THROW(w.split(-1, r), Error);
  EXPECT_THROW(make_world_communicator("carrier-pigeon"), Error);
  if (w.name() != "mpi") GTEST_SKIP() << "MPI-only error paths";
  // bf16 reductions are allowed (test_reduce_dtype.cpp); an overlapping bf16 reduce-scatter is not
  EXPECT_THROW(w.reduce_scatter(buf.data(), buf.data(), 1, DType::BF16, ReduceOp::avg), Error);
  EXPECT_THROW(w.reduce_scatter(buf.data() + 1, buf.data(), 2, DType::F32, ReduceOp::sum), Error);
  EXPECT_THROW(w.all_gather(buf.data(), buf.data() + r * 2 + 1, 2, DType::F32), Error);
  EXPECT_EQ(w.ledger().in_flight(), 0);
#ifdef GPT_WITH_MPI
  // MPI's own parameter check rejects the root before any traffic, on every rank alike.
  try {
    MPI_CHECK(MPI_Bcast(buf.data(), 1, MPI_BYTE, n + 5, MPI_COMM_WORLD));
    ADD_FAILURE() << "MPI_Bcast with an invalid root did not fail";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("MPI_Bcast"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("MPI_ERR"), std::string::npos) << e.what();
  }
#endif
}

TEST(Comm, MakeWorldCommunicatorKinds) {
  Communicator& w = world();
  auto single = make_world_communicator("single");
  EXPECT_EQ(single->name(), "single");
  EXPECT_EQ(single->world(), 1);
  if (w.name() != "mpi") GTEST_SKIP() << "not launched under MPI";
  auto again = make_world_communicator("auto");
  EXPECT_EQ(again->name(), "mpi");
  EXPECT_EQ(again->rank(), w.rank());
  EXPECT_EQ(again->world(), w.world());
  auto forced = make_world_communicator("mpi");
  EXPECT_DOUBLE_EQ(forced->all_reduce_scalar(1.0, ReduceOp::sum), w.world());
}

}  // namespace
}  // namespace gpt
