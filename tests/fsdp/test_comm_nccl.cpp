// The NCCL communicator under mpiexec, one rank per GPU: every collective checked on device buffers against
// values computed here in double precision from the rank-dependent inputs of all ranks (the same inputs as
// test_comm.cpp's MPI checks), the ordering against the compute stream (inputs written by a kernel just
// before the launch, results read by a kernel just after wait()), the ledger against the ring formulas
// written out below, and split. It skips on every rank alike unless the build has NCCL and at least as
// many GPUs are visible as there are ranks (at least 2): NCCL puts at most one rank on a GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "src/backend/backend.h"
#include "src/core/check.h"
#include "src/dist/collective_check.h"
#include "src/fsdp/engine.h"
#include "src/model/layout.h"
#include "tests/common/tiny_config.h"
#include "tests/fsdp/comm_test_values.h"
#include "tests/fsdp/mpi_world.h"
#ifdef GPT_WITH_NCCL
#include <cuda_runtime.h>

#include "src/dist/comm_nccl.h"
#endif

namespace gpt {
namespace {

using test::world;

using test::ag_bytes;
using test::ar_bytes;
using test::val;

// bf16 is the upper half of an f32: exact for the small integers used below.
uint16_t bf16_bits(float x) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  return static_cast<uint16_t>(u >> 16);
}
float bf16_value(uint16_t b) {
  uint32_t u = static_cast<uint32_t>(b) << 16;
  float x;
  std::memcpy(&x, &u, 4);
  return x;
}

// Why this rank cannot run the NCCL tests, or "" when it can.
std::string local_skip_reason() {
#ifdef GPT_WITH_NCCL
  const int n = world().world();
  if (n < 2) return "NCCL tests need at least 2 ranks";
  if (!cuda_available()) return "no CUDA GPU is visible";
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) return "cudaGetDeviceCount failed";
  if (count < n) return str(count, " GPUs visible for ", n, " ranks (NCCL needs one GPU per rank)");
  return "";
#else
  return "this build has no NCCL";
#endif
}

class NcclComm : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    std::string mine = local_skip_reason();
#ifdef GPT_WITH_NCCL
    // every rank skips when any rank must (the NCCL bootstrap is collective)
    if (world().all_reduce_max(mine.empty() ? 0.0 : 1.0) > 0) {
      skip_ = mine.empty() ? "another rank cannot run the NCCL tests" : mine;
      return;
    }
    try {
      collective_check(world(), "cuda backend",
                       [] { backend_ = make_backend(DeviceKind::cuda, world().local_rank()); });
      comm_ = make_nccl_communicator(world(), *backend_);
    } catch (const std::exception& e) {
      setup_error_ = e.what();
      comm_.reset();
    }
#else
    skip_ = mine;
#endif
  }
  static void TearDownTestSuite() {
    comm_.reset();  // before the backend whose stream it uses
    backend_.reset();
  }
  void SetUp() override {
    if (!skip_.empty()) GTEST_SKIP() << skip_;
    ASSERT_TRUE(comm_) << "NCCL communicator setup failed: " << setup_error_;
  }

  // A device buffer holding `host`, freed at scope exit.
  struct DeviceBuf {
    void* p = nullptr;
    size_t bytes = 0;
    ~DeviceBuf() {
      if (p) backend_->free(p);
    }
  };
  template <typename T>
  static std::unique_ptr<DeviceBuf> upload(const std::vector<T>& host) {
    auto d = std::make_unique<DeviceBuf>();
    d->bytes = host.size() * sizeof(T);
    d->p = backend_->alloc(d->bytes, MemCat::workspace);
    backend_->copy_h2d(d->p, host.data(), d->bytes);
    return d;
  }
  template <typename T>
  static std::vector<T> download(const DeviceBuf& d) {
    std::vector<T> host(d.bytes / sizeof(T));
    backend_->copy_d2h(host.data(), d.p, d.bytes);
    backend_->synchronize();
    return host;
  }

  static std::unique_ptr<Backend> backend_;
  static std::unique_ptr<Communicator> comm_;
  static std::string skip_, setup_error_;
};
std::unique_ptr<Backend> NcclComm::backend_;
std::unique_ptr<Communicator> NcclComm::comm_;
std::string NcclComm::skip_;
std::string NcclComm::setup_error_;

TEST_F(NcclComm, MatchesWorld) {
  EXPECT_EQ(comm_->name(), "nccl");
  EXPECT_EQ(comm_->rank(), world().rank());
  EXPECT_EQ(comm_->world(), world().world());
}

TEST_F(NcclComm, AllGather) {
  const int n = comm_->world(), r = comm_->rank();
  const size_t count = 5;
  std::vector<float> in(count);  // (count)
  for (size_t i = 0; i < count; ++i) in[i] = val(r, i);
  auto d_in = upload(in);
  auto d_out = upload(std::vector<float>(n * count, NAN));  // (N*count)
  comm_->all_gather(d_out->p, d_in->p, count, DType::F32);
  std::vector<float> out = download<float>(*d_out);
  for (int q = 0; q < n; ++q)
    for (size_t i = 0; i < count; ++i) EXPECT_EQ(out[q * count + i], val(q, i)) << "rank " << q << " i " << i;
}

TEST_F(NcclComm, AllGatherInPlaceBf16) {
  const int n = comm_->world(), r = comm_->rank();
  const size_t count = 3;
  std::vector<uint16_t> buf(n * count, 0xffff);  // (N*count) bf16 bit patterns, only this rank's slice set
  for (size_t i = 0; i < count; ++i) buf[r * count + i] = static_cast<uint16_t>(0x3f80 + 16 * r + i);
  auto d = upload(buf);
  comm_->all_gather(d->p, static_cast<uint16_t*>(d->p) + r * count, count, DType::BF16);
  std::vector<uint16_t> out = download<uint16_t>(*d);
  for (int q = 0; q < n; ++q)
    for (size_t i = 0; i < count; ++i) EXPECT_EQ(out[q * count + i], 0x3f80 + 16 * q + i);
}

void check_reduce_scatter(Communicator& c, Backend& b, ReduceOp op) {
  const int n = c.world(), r = c.rank();
  const size_t count = 6;
  std::vector<float> in(n * count);  // (N*count)
  for (size_t j = 0; j < in.size(); ++j) in[j] = val(r, j);
  void* d_in = b.alloc(in.size() * 4, MemCat::workspace);
  void* d_out = b.alloc(count * 4, MemCat::workspace);  // (count)
  b.copy_h2d(d_in, in.data(), in.size() * 4);
  c.reduce_scatter(d_out, d_in, count, DType::F32, op);
  std::vector<float> out(count);
  b.copy_d2h(out.data(), d_out, count * 4);
  b.synchronize();
  for (size_t i = 0; i < count; ++i) {
    double sum = 0;
    for (int q = 0; q < n; ++q) sum += val(q, r * count + i);
    double want = op == ReduceOp::avg ? sum / n : sum;
    EXPECT_NEAR(out[i], want, 1e-6 * std::fabs(want)) << "i " << i;
  }
  b.free(d_in);
  b.free(d_out);
}

TEST_F(NcclComm, ReduceScatterSum) { check_reduce_scatter(*comm_, *backend_, ReduceOp::sum); }
TEST_F(NcclComm, ReduceScatterAvg) { check_reduce_scatter(*comm_, *backend_, ReduceOp::avg); }

// bf16 reductions: small integers and their sums are exact in bf16; the mean may round a few times.
TEST_F(NcclComm, ReduceScatterBf16) {
  const int n = comm_->world(), r = comm_->rank();
  const size_t count = 8;
  std::vector<uint16_t> in(n * count);  // (N*count) bf16
  for (size_t j = 0; j < in.size(); ++j) in[j] = bf16_bits(static_cast<float>((r + 1) * (j % 5)));
  auto d_in = upload(in);
  auto d_sum = upload(std::vector<uint16_t>(count));  // (count)
  auto d_avg = upload(std::vector<uint16_t>(count));  // (count)
  comm_->reduce_scatter(d_sum->p, d_in->p, count, DType::BF16, ReduceOp::sum);
  comm_->reduce_scatter(d_avg->p, d_in->p, count, DType::BF16, ReduceOp::avg);
  std::vector<uint16_t> sum = download<uint16_t>(*d_sum), avg = download<uint16_t>(*d_avg);
  for (size_t i = 0; i < count; ++i) {
    const double want = n * (n + 1) / 2.0 * ((r * count + i) % 5);
    EXPECT_EQ(bf16_value(sum[i]), want) << "i " << i;
    EXPECT_NEAR(bf16_value(avg[i]), want / n, std::ldexp(want / n, -6) + 1e-6) << "i " << i;
  }
}

void check_all_reduce(Communicator& c, Backend& b, ReduceOp op) {
  const int n = c.world(), r = c.rank();
  const size_t count = 1001;
  std::vector<float> buf(count);  // (count)
  for (size_t i = 0; i < count; ++i) buf[i] = (r + 1.0f) * static_cast<float>(i % 97) - 0.25f * r;
  void* d = b.alloc(count * 4, MemCat::workspace);
  b.copy_h2d(d, buf.data(), count * 4);
  c.all_reduce(d, count, DType::F32, op);
  b.copy_d2h(buf.data(), d, count * 4);
  b.synchronize();
  b.free(d);
  for (size_t i = 0; i < count; ++i) {
    double sum = 0;
    for (int q = 0; q < n; ++q) sum += (q + 1.0) * (i % 97) - 0.25 * q;
    double want = op == ReduceOp::avg ? sum / n : sum;
    EXPECT_NEAR(buf[i], want, 1e-6 * std::fabs(want) + 1e-6) << "i " << i;
  }
}

TEST_F(NcclComm, AllReduceSum) { check_all_reduce(*comm_, *backend_, ReduceOp::sum); }
TEST_F(NcclComm, AllReduceAvg) { check_all_reduce(*comm_, *backend_, ReduceOp::avg); }

// max in fp32 (the vocab-parallel loss's row maxima): exact.
TEST_F(NcclComm, AllReduceMax) {
  const int n = comm_->world(), r = comm_->rank();
  const size_t count = 257;
  std::vector<float> buf(count);  // (count)
  for (size_t i = 0; i < count; ++i) buf[i] = -1.5f * (float)((r + i) % n) - (float)i;
  void* d = backend_->alloc(count * 4, MemCat::workspace);
  backend_->copy_h2d(d, buf.data(), count * 4);
  comm_->all_reduce(d, count, DType::F32, ReduceOp::max);
  backend_->copy_d2h(buf.data(), d, count * 4);
  backend_->synchronize();
  backend_->free(d);
  for (size_t i = 0; i < count; ++i) {
    float want = -INFINITY;
    for (int q = 0; q < n; ++q) want = std::max(want, -1.5f * (float)((q + i) % n) - (float)i);
    EXPECT_EQ(buf[i], want) << "i " << i;
  }
}

// No host synchronisation between the kernel that writes the input, the collective and the kernel that
// reads the result: only the events order them. A large buffer makes a missing edge visible.
TEST_F(NcclComm, OrderedWithComputeStream) {
  const int n = comm_->world(), r = comm_->rank();
  const size_t count = size_t(1) << 22;
  auto d_buf = upload(std::vector<float>(count, static_cast<float>(r)));  // (count)
  auto d_one = upload(std::vector<float>(count, 1.0f));                   // (count)
  backend_->synchronize();
  backend_->accumulate_f32(static_cast<float*>(d_buf->p), static_cast<float*>(d_one->p), count, 1);  // r + 1
  WorkPtr work = comm_->all_reduce_async(d_buf->p, count, DType::F32, ReduceOp::sum);
  work->wait();
  backend_->accumulate_f32(static_cast<float*>(d_buf->p), static_cast<float*>(d_one->p), count, 1);  // + 1
  std::vector<float> out = download<float>(*d_buf);
  const float want = n * (n + 1) / 2.0f + 1.0f;
  size_t wrong = 0;
  for (float x : out) wrong += x != want;
  EXPECT_EQ(wrong, 0u) << "first " << out[0] << " last " << out[count - 1] << " want " << want;
}

TEST_F(NcclComm, TwoCollectivesInFlight) {
  const int n = comm_->world(), r = comm_->rank();
  const size_t ca = 4, cb = 8;
  std::vector<float> a_in(ca), b(cb);  // (ca), (cb)
  for (size_t i = 0; i < ca; ++i) a_in[i] = val(r, i);
  for (size_t i = 0; i < cb; ++i) b[i] = static_cast<float>(r + i);
  auto d_a_in = upload(a_in);
  auto d_a_out = upload(std::vector<float>(n * ca, NAN));  // (N*ca)
  auto d_b = upload(b);
  EXPECT_EQ(comm_->ledger().in_flight(), 0);
  WorkPtr wa = comm_->all_gather_async(d_a_out->p, d_a_in->p, ca, DType::F32);
  EXPECT_EQ(comm_->ledger().in_flight(), ag_bytes(ca, 4, n));
  WorkPtr wb = comm_->all_reduce_async(d_b->p, cb, DType::F32, ReduceOp::sum);
  EXPECT_EQ(comm_->ledger().in_flight(), ag_bytes(ca, 4, n) + ar_bytes(cb, 4, n));
  wb->wait();
  EXPECT_EQ(comm_->ledger().in_flight(), ag_bytes(ca, 4, n));
  wa->wait();
  wa->wait();  // a second wait is a no-op
  EXPECT_EQ(comm_->ledger().in_flight(), 0);
  std::vector<float> a_out = download<float>(*d_a_out), b_out = download<float>(*d_b);
  for (size_t i = 0; i < cb; ++i) EXPECT_EQ(b_out[i], n * (n - 1) / 2.0 + n * static_cast<double>(i));
  for (int q = 0; q < n; ++q)
    for (size_t i = 0; i < ca; ++i) EXPECT_EQ(a_out[q * ca + i], val(q, i));
}

TEST_F(NcclComm, BroadcastFromEveryRoot) {
  const int n = comm_->world(), r = comm_->rank();
  for (int root = 0; root < n; ++root) {
    std::vector<uint8_t> buf(37, 0);  // (37 bytes)
    if (r == root)
      for (size_t i = 0; i < buf.size(); ++i) buf[i] = static_cast<uint8_t>(7 * root + i);
    auto d = upload(buf);
    comm_->broadcast(d->p, buf.size(), root);
    std::vector<uint8_t> out = download<uint8_t>(*d);
    for (size_t i = 0; i < out.size(); ++i) EXPECT_EQ(out[i], static_cast<uint8_t>(7 * root + i)) << root;
  }
}

TEST_F(NcclComm, LedgerMatchesRingFormulas) {
  const int n = comm_->world(), r = comm_->rank();
  auto c = comm_->split(0, r);  // same ranks, fresh ledger
  EXPECT_EQ(c->name(), "nccl");
  const int64_t c_ag = 6, c_rs = 7, c_ar = 10, bcast = 9;
  auto ag_in = upload(std::vector<uint16_t>(c_ag, 0x3f80));   // (c_ag) bf16
  auto ag_out = upload(std::vector<uint16_t>(n * c_ag));      // (N*c_ag) bf16
  auto rs_in = upload(std::vector<float>(n * c_rs, 1.0f));    // (N*c_rs)
  auto rs_out = upload(std::vector<float>(c_rs));             // (c_rs)
  auto ar = upload(std::vector<float>(c_ar, 1.0f));           // (c_ar)
  auto bytes = upload(std::vector<uint8_t>(bcast, 3));        // (bcast bytes)
  c->all_gather(ag_out->p, ag_in->p, c_ag, DType::BF16);
  c->reduce_scatter(rs_out->p, rs_in->p, c_rs, DType::F32, ReduceOp::avg);
  c->all_reduce(ar->p, c_ar, DType::F32, ReduceOp::sum);
  c->broadcast(bytes->p, bcast, 0);
  backend_->synchronize();
  CommCounters t = c->ledger().total();
  EXPECT_EQ(t.bytes_sent[int(CollKind::all_gather)], c_ag * 2 * (n - 1));
  EXPECT_EQ(t.bytes_sent[int(CollKind::reduce_scatter)], c_rs * 4 * (n - 1));
  EXPECT_EQ(t.bytes_sent[int(CollKind::all_reduce)], 2 * c_ar * 4 * (n - 1) / n);
  EXPECT_EQ(t.bytes_sent[int(CollKind::broadcast)], bcast * (n - 1) / n);
  for (int k = 0; k < kCollKinds; ++k) EXPECT_EQ(t.calls[k], 1) << collkind_name(CollKind(k));
  EXPECT_EQ(c->ledger().in_flight(), 0);
  // host-side helpers go through MPI and are not model traffic
  EXPECT_DOUBLE_EQ(c->all_reduce_scalar(r + 1.0, ReduceOp::sum), n * (n + 1) / 2.0);
  EXPECT_DOUBLE_EQ(c->all_reduce_scalar(r + 1.0, ReduceOp::avg), (n + 1) / 2.0);
  EXPECT_DOUBLE_EQ(c->all_reduce_max(1.5 * r), 1.5 * (n - 1));
  c->barrier();
  EXPECT_EQ(c->ledger().total().total_sent(), t.total_sent());
}

// Hybrid groups: color = rank % 2. Group g holds global ranks g, g+2, ...

// x rounded to bf16, ties to even, without bit tricks: the significand scaled to 8 bits and rounded by
// nearbyint (normal, finite x).
double nearest_bf16(double x) {
  int e = 0;
  const double m = std::frexp(x, &e);
  return std::ldexp(std::nearbyint(std::ldexp(m, 8)), e - 8);
}

// One micro-step of the engine with the model left out: every unit acquired in both passes in the layout's
// order, each unit's full gradient set on this rank to grad_of(rank, unit, element), the reductions finished.
template <typename GradOf>
void step_with_gradients(FsdpEngine& engine, const Layout& layout, Backend& be, int rank, GradOf grad_of) {
  engine.begin_step();
  engine.begin_micro_step(true);
  for (int u : layout.pass_order(Pass::forward)) {
    engine.acquire(u, Pass::forward);
    engine.release(u, Pass::forward);
  }
  const std::vector<int>& back = layout.pass_order(Pass::backward);  // embed first, its gradient last
  std::vector<int> grads(back.begin() + 1, back.end());
  grads.push_back(back[0]);
  engine.acquire(back[0], Pass::backward);
  for (int u : grads) {
    if (u != back[0]) engine.acquire(u, Pass::backward);
    std::vector<float> g((size_t)layout.unit(u).numel);  // (numel) this rank's full gradient of unit u
    for (size_t i = 0; i < g.size(); i++) g[i] = grad_of(rank, u, (int64_t)i);
    be.copy_h2d(engine.grad_buffer(u), g.data(), g.size() * 4);
    engine.grad_ready(u);
    engine.release(u, Pass::backward);
  }
  engine.finish_backward();
}

// The FSDP engine's gradient average over NCCL with --reduce-dtype bf16, against the exact mean. Every rank
// gives every element a positive gradient (no cancellation); the engine rounds it to bf16, NCCL sums, and
// the result is averaged. Reference: m = sum over ranks of bf16(g_r) / N, in double.
//  - Per element (Higham's bound for N - 1 bf16 combines, u = 2^-8 as in test_reduce_dtype.cpp, then one
//    fp32 division): |out / m - 1| <= g + (1 + g) 2^-23, g = (N-1)u / (1 - (N-1)u).
//  - In the mean over the shard's elements: rounding to nearest is unbiased, so the mean relative error
//    of a correct average is near 0 (its spread, about 2^-8 / sqrt(12) per rounding over thousands of
//    elements, is a few 1e-5). NCCL's own average (ncclAvg: each input times bf16(1/N) first) is biased by
//    N x bf16(1/N) - 1, +2^-9 = 1.95e-3 at N = 3; the check allows a quarter of that.
// At N = 2 and 4, bf16(1/N) is exact and the bias is 0; the check is the N = 3 run's (simt.nccl_np3).
TEST_F(NcclComm, EngineAveragesGradientsWithoutNcclsBias) {
  const int n = comm_->world(), r = comm_->rank();
  const Layout layout(test::tiny_config(1, 1, 32, 16, 61));
  FsdpOptions opt;
  opt.reduce_dtype = DType::BF16;
  FsdpEngine engine(*backend_, *comm_, layout, opt);
  auto grad_of = [](int rank, int u, int64_t i) {  // positive, with low mantissa bits set
    const uint64_t x = (uint64_t)rank * 0x9e3779b97f4a7c15ULL ^ ((uint64_t)u << 40) ^ (uint64_t)i * 0xbf58476d1ce4e5b9ULL;
    return (float)std::ldexp(1.0 + (double)((x >> 11) % 1000003) / 1000003.0, (int)(i % 5) - 2);
  };
  step_with_gradients(engine, layout, *backend_, r, grad_of);
  const double u8 = 1.0 / 256, gam = (n - 1) * u8 / (1 - (n - 1) * u8), bound = gam + (1 + gam) * std::ldexp(1.0, -23);
  double sum_err = 0, worst = 0;
  int64_t count = 0;
  for (int u = 0; u < layout.num_units(); u++) {
    std::vector<float> out;
    engine.shard_to_host(u, ShardState::grad, out);
    const UnitGeometry& sh = engine.shard(u);
    for (int64_t k = 0; k < sh.shard_numel; k++) {
      const int64_t i = sh.shard_offset + k;
      if (i >= sh.numel) break;  // padding
      double m = 0;
      for (int q = 0; q < n; q++) m += nearest_bf16(grad_of(q, u, i));
      m /= n;
      const double e = out[(size_t)k] / m - 1;
      sum_err += e, worst = std::max(worst, std::fabs(e)), count++;
    }
  }
  ASSERT_GT(count, 4000);
  EXPECT_LE(worst, bound) << "rank " << r;
  EXPECT_LT(std::fabs(sum_err / count), std::ldexp(1.0, -9) / 4)
      << "rank " << r << ": mean relative error of the averaged gradient " << sum_err / count << " over " << count
      << " elements (ncclAvg's bias at N = 3 would be +1.95e-3)";
}

// Hybrid at N = 4, G = 2 (run by simt.nccl_np4 only): the replica all-reduce is issued right behind the
// reduce-scatter on the shared comm stream (grad_side.cpp, grad_ready), before either is waited for. With
// small integer gradients every sum is exact in fp32 and in bf16, so each rank's grad shard must equal the
// mean over the 4 ranks bit for bit: an all-reduce that ran ahead of its reduce-scatter, or on the wrong
// buffer, cannot.
TEST_F(NcclComm, HybridReplicaAllReduceQueuedBehindTheReduceScatter) {
  const int n = comm_->world(), r = comm_->rank();
  ASSERT_EQ(n, 4) << "run at 4 ranks (simt.nccl_np4)";
  ASSERT_TRUE(comm_->stream_ordered());
  const Layout layout(test::tiny_config(2, 1, 32, 16, 61));
  auto grad_of = [](int rank, int u, int64_t i) { return (float)((rank + 1) * (int)((i + 3 * u) % 5 + 1)); };
  for (DType rdt : {DType::F32, DType::BF16}) {
    FsdpOptions opt;
    opt.strategy = ShardStrategy::hybrid;
    opt.shard_group = 2;
    opt.reduce_dtype = rdt;
    FsdpEngine engine(*backend_, *comm_, layout, opt);
    step_with_gradients(engine, layout, *backend_, r, grad_of);
    int64_t checked = 0;
    for (int u = 0; u < layout.num_units(); u++) {
      std::vector<float> out;
      engine.shard_to_host(u, ShardState::grad, out);
      const UnitGeometry& sh = engine.shard(u);
      for (int64_t k = 0; k < sh.shard_numel && sh.shard_offset + k < sh.numel; k++, checked++) {
        const int64_t i = sh.shard_offset + k;
        float sum = 0;
        for (int q = 0; q < n; q++) sum += grad_of(q, u, i);
        ASSERT_EQ(out[(size_t)k], sum / n) << dtype_name(rdt) << " unit " << u << " element " << i << " rank " << r;
      }
    }
    EXPECT_GT(checked, 1000);
  }
}

TEST_F(NcclComm, SplitIntoParityGroups) {
  const int n = comm_->world(), r = comm_->rank();
  const int color = r % 2, gn = (n - color + 1) / 2;
  auto g = comm_->split(color, r);
  EXPECT_EQ(g->world(), gn);
  EXPECT_EQ(g->rank(), r / 2);
  const size_t count = 3;
  std::vector<float> in(count);  // (count)
  for (size_t i = 0; i < count; ++i) in[i] = val(r, i);
  auto d_in = upload(in);
  auto d_out = upload(std::vector<float>(gn * count, NAN));  // (gn*count)
  auto d_sum = upload(in);                                    // (count)
  g->all_gather(d_out->p, d_in->p, count, DType::F32);
  g->all_reduce(d_sum->p, count, DType::F32, ReduceOp::sum);
  std::vector<float> out = download<float>(*d_out), sum = download<float>(*d_sum);
  for (int k = 0; k < gn; ++k)
    for (size_t i = 0; i < count; ++i) EXPECT_EQ(out[k * count + i], val(color + 2 * k, i));
  for (size_t i = 0; i < count; ++i) {
    double want = 0;
    for (int k = 0; k < gn; ++k) want += val(color + 2 * k, i);
    EXPECT_EQ(sum[i], want);
  }
  EXPECT_EQ(g->ledger().total().bytes_sent[int(CollKind::all_gather)], ag_bytes(count, 4, gn));
  EXPECT_EQ(g->ledger().total().bytes_sent[int(CollKind::all_reduce)], ar_bytes(count, 4, gn));
  EXPECT_DOUBLE_EQ(g->all_reduce_scalar(1.0, ReduceOp::sum), gn);
}

// Argument errors are caught before any NCCL call, on every rank alike, and leave nothing in flight.
TEST_F(NcclComm, ErrorsAreMessages) {
  const int n = comm_->world(), r = comm_->rank();
  auto d = upload(std::vector<float>(4 * n));  // (4N)
  float* p = static_cast<float*>(d->p);
  EXPECT_THROW(comm_->broadcast(p, 4, n), Error);
  EXPECT_THROW(comm_->broadcast(p, 4, -1), Error);
  EXPECT_THROW(comm_->split(-1, r), Error);
  EXPECT_THROW(comm_->all_gather(p, p + r * 2 + 1, 2, DType::F32), Error);
  EXPECT_THROW(comm_->reduce_scatter(p + 1, p, 2, DType::F32, ReduceOp::sum), Error);
  EXPECT_EQ(comm_->ledger().in_flight(), 0);
}

}  // namespace
}  // namespace gpt
