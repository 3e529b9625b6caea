// The MPI communicator for CPU ranks (OpenMPI). Collectives are MPI's nonblocking calls (MPI_Iallgather,
// MPI_Ireduce_scatter_block, MPI_Iallreduce); the returned Work holds the MPI_Request and wait() is
// MPI_Wait. ReduceOp::avg is a sum followed by a division by the group size inside wait(); all_gather
// moves raw elements, so it takes either dtype.
//
// BF16 reductions (--reduce-dtype bf16): MPI has no bf16 type and cannot add one, so bf16 elements travel
// as 16-bit words and are summed by a user-defined MPI_Op (created once with MPI_Op_create, commutative,
// freed in finalize_communication). Each combine widens both words to fp32 (exact), adds them in fp32
// and rounds the sum to bf16, nearest-even; the fp32 sum of two bf16 values is exact unless their
// exponents differ by more than 16, and then the smaller lies far below half a bf16 ulp of the larger,
// so every combine is the correctly rounded bf16 sum. A reduction over N ranks therefore rounds N-1 times
// (in whatever order MPI's algorithm combines). avg = that bf16 sum widened, divided by N in fp32 and
// rounded to bf16 once more.
//
// Progress: OpenMPI advances a nonblocking collective only while the process is inside an MPI call (there
// is no progress thread), so on CPU ranks most of the transfer happens in wait(). Starting early still lets
// the small first steps go out, but the overlap of communication with compute on CPU ranks is limited by
// MPI progress; the NCCL communicator overlaps for real on its own stream.
//
// Ledger: each call records its ring-algorithm bytes (dist/comm_volume.h) when it is started, and the same
// bytes count as "in flight" from start until wait(). A Work must be waited for (or destroyed) before the
// communicator that started it.
//
// This file also owns MPI's lifetime: make_world_communicator initialises MPI (MPI_THREAD_FUNNELED: only
// the main thread calls MPI) and finalize_communication ends it.
#include <climits>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>

#include "src/core/check.h"
#include "src/dist/comm_volume.h"
#include "src/dist/comm_world.h"
#include "src/dist/mpi_check.h"
#include "src/util/watchdog.h"

namespace gpt {
namespace {

int mpi_count(size_t count, const char* what) {
  GPT_CHECK(count <= static_cast<size_t>(INT_MAX), "mpi ", what, ": ", count,
            " elements exceed MPI's int count limit (", INT_MAX, "); split the buffer");
  return static_cast<int>(count);
}

// The element type MPI moves. BF16 is carried as 16-bit words (its sum is bf16_sum_op below).
MPI_Datatype mpi_type(DType dt) { return dt == DType::F32 ? MPI_FLOAT : MPI_UINT16_T; }

// The MPI_User_function of the bf16 sum: inout[i] = bf16(fp32(in[i]) + fp32(inout[i])).
void bf16_sum(void* in, void* inout, int* len, MPI_Datatype*) {
  const auto* a = static_cast<const uint16_t*>(in);  // (len) bf16 words
  auto* b = static_cast<uint16_t*>(inout);           // (len) bf16 words
  for (int i = 0; i < *len; ++i) b[i] = bf16_round(bf16_widen(a[i]) + bf16_widen(b[i]));
}

MPI_Op g_bf16_sum = MPI_OP_NULL;  // created on first use (after MPI_Init), freed before MPI_Finalize

// The reduction MPI applies for `op` (avg: a sum, divided afterwards) of elements of type dt.
MPI_Op mpi_op(ReduceOp op, DType dt) {
  if (op == ReduceOp::max) {
    GPT_CHECK(dt == DType::F32, "mpi: a max reduction is fp32 only");
    return MPI_MAX;
  }
  if (dt == DType::F32) return MPI_SUM;
  if (g_bf16_sum == MPI_OP_NULL) MPI_CHECK(MPI_Op_create(&bf16_sum, 1, &g_bf16_sum));
  return g_bf16_sum;
}

bool overlaps(const void* a, size_t a_bytes, const void* b, size_t b_bytes) {
  auto pa = reinterpret_cast<uintptr_t>(a), pb = reinterpret_cast<uintptr_t>(b);
  return a_bytes > 0 && b_bytes > 0 && pa < pb + b_bytes && pb < pa + a_bytes;
}

// One in-flight collective: the request, its ledger bytes, and the avg scaling that follows the sum.
class MpiWork : public Work {
 public:
  MpiWork(MPI_Request req, const char* what, CommLedger* ledger, int64_t bytes, void* avg_buf, DType avg_dt,
          size_t avg_count, int world)
      : req_(req), what_(what), ledger_(ledger), bytes_(bytes), avg_buf_(avg_buf), avg_dt_(avg_dt),
        avg_count_(avg_count), world_(world) {}
  ~MpiWork() override {
    if (done_) return;
    try {
      wait();
    } catch (const std::exception& e) {  // a destructor cannot throw: report and end the rank
      std::fprintf(stderr, "error: %s\n", e.what());
      std::fflush(nullptr);
      MPI_Abort(MPI_COMM_WORLD, 1);
    }
  }
  void wait() override {
    if (done_) return;
    done_ = true;  // set first: a failed MPI_Wait is fatal and must not be retried by the destructor
    watchdog::beat(what_);
    MPI_CHECK(MPI_Wait(&req_, MPI_STATUS_IGNORE));
    ledger_->add_in_flight(-bytes_);
    if (avg_buf_) mean_from_sum();
  }

 private:
  // avg_buf_ (count) sum -> mean, in its own dtype (bf16: widen, divide in fp32, round).
  void mean_from_sum() {
    const float n = static_cast<float>(world_);
    if (avg_dt_ == DType::F32) {
      auto* x = static_cast<float*>(avg_buf_);
      for (size_t i = 0; i < avg_count_; ++i) x[i] /= n;
    } else {
      auto* x = static_cast<uint16_t*>(avg_buf_);
      for (size_t i = 0; i < avg_count_; ++i) x[i] = bf16_round(bf16_widen(x[i]) / n);
    }
  }

  MPI_Request req_;
  const char* what_;  // the collective, for the watchdog
  CommLedger* ledger_;
  int64_t bytes_;
  void* avg_buf_;  // null unless ReduceOp::avg
  DType avg_dt_;
  size_t avg_count_;
  int world_;
  bool done_ = false;
};

class MpiCommunicator : public Communicator {
 public:
  // Takes ownership of `comm` (freed in the destructor unless MPI is already finalised). Collective over
  // `comm`: the node-local rank comes from splitting it by shared memory, once, here.
  explicit MpiCommunicator(MPI_Comm comm) : comm_(comm) {
    MPI_CHECK(MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN));
    MPI_CHECK(MPI_Comm_rank(comm_, &rank_));
    MPI_CHECK(MPI_Comm_size(comm_, &world_));
    MPI_Comm node;  // the ranks of comm_ that share this node's memory, ordered by their rank in comm_
    MPI_CHECK(MPI_Comm_split_type(comm_, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &node));
    MPI_CHECK(MPI_Comm_rank(node, &local_rank_));
    MPI_CHECK(MPI_Comm_size(node, &local_size_));
    MPI_CHECK(MPI_Comm_free(&node));
  }
  ~MpiCommunicator() override {
    int finalized = 1;
    MPI_Finalized(&finalized);
    if (!finalized) MPI_Comm_free(&comm_);
  }
  std::string name() const override { return "mpi"; }
  int rank() const override { return rank_; }
  int world() const override { return world_; }
  int local_rank() const override { return local_rank_; }
  int local_size() const override { return local_size_; }

  WorkPtr all_gather_async(void* out, const void* in, size_t count, DType dt) override;
  WorkPtr reduce_scatter_async(void* out, const void* in, size_t count, DType dt, ReduceOp op) override;
  WorkPtr all_reduce_async(void* buf, size_t count, DType dt, ReduceOp op) override;
  void broadcast(void* buf, size_t bytes, int root) override;
  void barrier() override {
    watchdog::beat("barrier");
    MPI_CHECK(MPI_Barrier(comm_));
  }
  double all_reduce_scalar(double x, ReduceOp op) override {
    if (op == ReduceOp::max) return all_reduce_max(x);
    watchdog::beat("all-reduce of a scalar");
    MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &x, 1, MPI_DOUBLE, MPI_SUM, comm_));
    return op == ReduceOp::avg ? x / world_ : x;
  }
  double all_reduce_max(double x) override {
    watchdog::beat("all-reduce of a scalar");
    MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &x, 1, MPI_DOUBLE, MPI_MAX, comm_));
    return x;
  }
  std::unique_ptr<Communicator> split(int color, int key) override {
    GPT_CHECK(color >= 0, "mpi split: color ", color, " must be >= 0");
    MPI_Comm sub;
    MPI_CHECK(MPI_Comm_split(comm_, color, key, &sub));
    return std::make_unique<MpiCommunicator>(sub);
  }
  void abort(int code) override {
    std::fflush(nullptr);
    MPI_Abort(comm_, code);
    std::exit(code);  // MPI_Abort does not return; this only satisfies the contract if it ever did
  }

 private:
  // Records the started collective and wraps its request.
  WorkPtr started(MPI_Request req, CollKind kind, int64_t bytes, void* avg_buf, DType dt, size_t avg_count) {
    ledger_.record(kind, bytes);
    ledger_.add_in_flight(bytes);
    return std::make_unique<MpiWork>(req, collkind_name(kind), &ledger_, bytes, avg_buf, dt, avg_count, world_);
  }

  MPI_Comm comm_;
  int rank_ = 0, world_ = 1, local_rank_ = 0, local_size_ = 1;
};

WorkPtr MpiCommunicator::all_gather_async(void* out, const void* in, size_t count, DType dt) {
  const size_t bytes = count * dtype_size(dt);  // per rank
  const int n = mpi_count(count, "all_gather");
  // out (world*count) = concat of every rank's in (count); in == out + rank*count is MPI_IN_PLACE.
  const void* send = in;
  if (in == static_cast<char*>(out) + rank_ * bytes) {
    send = MPI_IN_PLACE;
  } else {
    GPT_CHECK(!overlaps(out, world_ * bytes, in, bytes), "mpi all_gather: `in` overlaps `out` but is not ",
              "out + rank*count, the only aliasing allowed");
  }
  MPI_Request req;
  MPI_CHECK(MPI_Iallgather(send, n, mpi_type(dt), out, n, mpi_type(dt), comm_, &req));
  return started(req, CollKind::all_gather, ring_all_gather_bytes(count, dt, world_), nullptr, dt, 0);
}

WorkPtr MpiCommunicator::reduce_scatter_async(void* out, const void* in, size_t count, DType dt, ReduceOp op) {
  const size_t bytes = count * dtype_size(dt);
  const int n = mpi_count(count, "reduce_scatter");
  GPT_CHECK(!overlaps(out, bytes, in, world_ * bytes), "mpi reduce_scatter: `out` (", count,
            " elements) overlaps `in` (world*count elements); use separate buffers");
  // out (count) = sum over ranks of in[rank*count .. (rank+1)*count)
  MPI_Request req;
  MPI_CHECK(MPI_Ireduce_scatter_block(in, out, n, mpi_type(dt), mpi_op(op, dt), comm_, &req));
  void* avg = op == ReduceOp::avg ? out : nullptr;
  return started(req, CollKind::reduce_scatter, ring_reduce_scatter_bytes(count, dt, world_), avg, dt, count);
}

WorkPtr MpiCommunicator::all_reduce_async(void* buf, size_t count, DType dt, ReduceOp op) {
  const int n = mpi_count(count, "all_reduce");
  // buf (count) = sum over ranks of buf, in place
  MPI_Request req;
  MPI_CHECK(MPI_Iallreduce(MPI_IN_PLACE, buf, n, mpi_type(dt), mpi_op(op, dt), comm_, &req));
  void* avg = op == ReduceOp::avg ? buf : nullptr;
  return started(req, CollKind::all_reduce, ring_all_reduce_bytes(count, dt, world_), avg, dt, count);
}

void MpiCommunicator::broadcast(void* buf, size_t bytes, int root) {
  GPT_CHECK(root >= 0 && root < world_, "mpi broadcast: root ", root, " is not a rank of this group (0..",
            world_ - 1, ")");
  constexpr size_t kChunk = size_t(1) << 30;  // MPI counts are int: send big buffers in 1 GiB pieces
  for (size_t off = 0; off < bytes; off += kChunk) {
    int n = static_cast<int>(bytes - off < kChunk ? bytes - off : kChunk);
    MPI_CHECK(MPI_Bcast(static_cast<char*>(buf) + off, n, MPI_BYTE, root, comm_));
  }
  ledger_.record(CollKind::broadcast, ring_broadcast_bytes(bytes, world_));
}

// Initialises MPI once (FUNNELED) and makes MPI_COMM_WORLD report errors instead of aborting.
void ensure_mpi_initialised() {
  int finalized = 0, initialised = 0;
  MPI_Finalized(&finalized);
  GPT_CHECK(!finalized, "MPI is already finalised: make communicators before finalize_communication()");
  MPI_Initialized(&initialised);
  if (!initialised) {
    int provided = 0;
    int code = MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided);
    GPT_CHECK(code == MPI_SUCCESS, "MPI_Init_thread failed (MPI error code ", code,
              "): start the program with mpiexec, or use the single communicator");
  }
  int provided = 0;
  MPI_CHECK(MPI_Query_thread(&provided));
  GPT_CHECK(provided >= MPI_THREAD_FUNNELED, "MPI provides thread level ", provided,
            " but the mpi communicator needs MPI_THREAD_FUNNELED");
  MPI_CHECK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
}

}  // namespace

std::unique_ptr<Communicator> make_world_communicator(const std::string& kind) {
  GPT_CHECK(kind == "auto" || kind == "mpi" || kind == "single", "unknown communicator \"", kind,
            "\" (expected auto, mpi or single)");
  if (kind == "single") return make_single_communicator();
  int initialised = 0;
  MPI_Initialized(&initialised);
  const bool launched = launcher_world_size() > 0;
  if (kind == "auto" && !launched && !initialised) return make_single_communicator();
  ensure_mpi_initialised();
  int world = 1;
  MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &world));
  if (kind == "auto" && !launched && world == 1) return make_single_communicator();
  MPI_Comm comm;  // a private copy of the world, so our collectives never match a caller's own MPI traffic
  MPI_CHECK(MPI_Comm_dup(MPI_COMM_WORLD, &comm));
  return std::make_unique<MpiCommunicator>(comm);
}

void finalize_communication() {
  int initialised = 0, finalized = 0;
  MPI_Initialized(&initialised);
  MPI_Finalized(&finalized);
  if (!initialised || finalized) return;
  if (g_bf16_sum != MPI_OP_NULL) MPI_CHECK(MPI_Op_free(&g_bf16_sum));
  MPI_CHECK(MPI_Finalize());
}

}  // namespace gpt
