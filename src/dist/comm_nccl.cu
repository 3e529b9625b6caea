// The NCCL communicator for GPU ranks (one rank per GPU), behind the same interface as the MPI one.
//
// Streams: every collective runs on the communicator's own high-priority stream, so it overlaps with the
// compute stream of the cuda backend. A communicator made by split() shares its parent's stream (hybrid
// sharding: the shard and the replica communicators): NCCL warns that collectives of two communicators in
// flight on different streams can deadlock (each waiting for SMs or peers the other holds), while on one
// stream they run in the order every rank issues them. A collective first records an event on the compute stream and makes
// the comm stream wait for it (its inputs, written by earlier ops, are then ready), launches the NCCL call,
// then records a "done" event on the comm stream. Work::wait() makes the COMPUTE stream wait for "done"
// (cudaStreamWaitEvent): it never blocks the host. The result is ready for every op and copy queued on the
// compute stream after wait(); the host sees it after a copy_d2h and Backend::synchronize(). A device
// buffer must not be freed or overwritten by the compute stream before the wait() of every collective that
// uses it (Backend::free synchronizes the compute stream, which then covers the collective too).
//
// Bootstrap: a private copy of the MPI world (split with one color) carries the NCCL unique id from rank 0
// and later the host-side calls (barrier, scalar reductions), so neither touches the caller's ledger.
// The device is chosen by the cuda backend (cudaSetDevice at its construction, GPU local_rank % count, with
// the local rank the caller took from Communicator::local_rank); this file only checks that it is still the
// current device and that every local rank of the MPI world has a GPU of its own.
//
// Ledger: the ring formulas of comm_volume.h, as in the MPI communicator; bytes count as in flight from the
// launch until wait(). BF16 reductions are allowed (NCCL adds bf16 natively); avg is NCCL's ncclAvg,
// which pre-multiplies each input by 1/N in the data type (in bf16 a biased factor unless N is a power of
// two), so the FSDP engine reduces gradients with sum and divides in fp32 itself.
// Errors: NCCL_CHECK on every call, plus ncclCommGetAsyncError after every launch and in wait().
// Hangs: the host never blocks on a collective, so the communicator is a hang source of the watchdog
// (src/util/watchdog.h): while the host polls the device it checks ncclCommGetAsyncError, names the oldest
// collective in flight ("the all-gather of blocks3 (2 ranks)", the unit from the engine's label) should the
// rank make no progress for --timeout, and aborts (ncclCommAbort).
// Trace: each collective's span on the trace's "comm stream" track is timed on the device (a clock of the
// comm stream, stream_clock.h), named by its kind and label.
#ifdef GPT_WITH_NCCL

#include <cuda_runtime.h>
#include <nccl.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <exception>
#include <memory>
#include <string>
#include <utility>

#include "src/backend/cuda/cuda_backend.h"
#include "src/backend/cuda/device_wait.h"
#include "src/backend/cuda/stream_clock.h"
#include "src/core/cuda_check.h"
#include "src/dist/collective_check.h"
#include "src/dist/comm_nccl.h"
#include "src/dist/comm_volume.h"
#include "src/dist/nccl_check.h"
#include "src/util/trace.h"
#include "src/util/watchdog.h"

namespace gpt {
namespace {

ncclDataType_t nccl_type(DType dt) { return dt == DType::F32 ? ncclFloat32 : ncclBfloat16; }
ncclRedOp_t nccl_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::sum: return ncclSum;
    case ReduceOp::avg: return ncclAvg;
    case ReduceOp::max: return ncclMax;
  }
  return ncclSum;
}

bool overlaps(const void* a, size_t a_bytes, const void* b, size_t b_bytes) {
  auto pa = reinterpret_cast<uintptr_t>(a), pb = reinterpret_cast<uintptr_t>(b);
  return a_bytes > 0 && b_bytes > 0 && pa < pb + b_bytes && pb < pa + a_bytes;
}

// Owning handles: destruction in reverse member order releases everything a half-built object holds.
struct CommDestroy {
  void operator()(ncclComm* c) const { ncclCommDestroy(c); }
};
struct EventDestroy {
  void operator()(CUevent_st* e) const { cudaEventDestroy(e); }
};
using CommHandle = std::unique_ptr<ncclComm, CommDestroy>;
using EventHandle = std::unique_ptr<CUevent_st, EventDestroy>;
using SharedEvent = std::shared_ptr<CUevent_st>;  // a collective's "done": its Work's and its flight record's

EventHandle make_event() {
  cudaEvent_t e = nullptr;
  CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
  return EventHandle(e);
}

// The comm stream (high priority) and its trace clock, shared by a communicator and its splits; the clock is
// bound to the trace's comm-stream track while the stream lives.
struct CommStream {
  cudaStream_t stream = nullptr;
  std::unique_ptr<cuda::EventClock> clock;
  CommStream() {
    int lowest = 0, highest = 0;  // numerically lower = higher priority
    CUDA_CHECK(cudaDeviceGetStreamPriorityRange(&lowest, &highest));
    CUDA_CHECK(cudaStreamCreateWithPriority(&stream, cudaStreamNonBlocking, highest));
    clock = std::make_unique<cuda::EventClock>(stream);
    trace::bind_clock(trace::kCommStream, clock.get());
  }
  ~CommStream() {
    clock.reset();  // unbinds it
    cudaStreamDestroy(stream);
  }
  CommStream(const CommStream&) = delete;
  CommStream& operator=(const CommStream&) = delete;
};
using StreamHandle = std::shared_ptr<CommStream>;

// Throws the error NCCL recorded for `comm` while running earlier launches, if any.
void check_async(ncclComm_t comm, const char* after) {
  ncclResult_t state = ncclSuccess;
  NCCL_CHECK(ncclCommGetAsyncError(comm, &state));
  if (state != ncclSuccess && state != ncclInProgress) {
    const std::string what = str(after, " (asynchronous error from ncclCommGetAsyncError)");
    detail::nccl_fail(state, what.c_str(), __FILE__, __LINE__);
  }
}

// One launched collective: its "done" event on the comm stream and its ledger bytes.
class NcclWork : public Work {
 public:
  NcclWork(SharedEvent done, cudaStream_t compute, ncclComm_t comm, CommLedger* ledger, int64_t bytes,
           Communicator* owner)
      : done_(std::move(done)), compute_(compute), comm_(comm), ledger_(ledger), bytes_(bytes), owner_(owner) {}
  ~NcclWork() override {
    if (waited_) return;
    try {
      wait();
    } catch (const std::exception& e) {  // a destructor cannot throw: report and end every rank
      std::fprintf(stderr, "error: %s\n", e.what());
      owner_->abort(1);
    }
  }
  // Orders the compute stream after the collective; the host does not wait.
  void wait() override {
    if (waited_) return;
    waited_ = true;  // set first: a failure here is fatal and must not be retried by the destructor
    ledger_->add_in_flight(-bytes_);
    CUDA_CHECK(cudaStreamWaitEvent(compute_, done_.get(), 0));
    check_async(comm_, "Work::wait");
  }

 private:
  SharedEvent done_;
  cudaStream_t compute_;
  ncclComm_t comm_;
  CommLedger* ledger_;
  int64_t bytes_;
  Communicator* owner_;
  bool waited_ = false;
};

class NcclCommunicator final : public Communicator {
 public:
  // Takes ownership of `comm`; `host` is a private MPI communicator over the same ranks in the same order.
  // `stream`: the comm stream to share (a split's parent's), or null to create one.
  NcclCommunicator(std::unique_ptr<Communicator> host, ncclComm_t comm, Backend& backend, StreamHandle stream = nullptr)
      : host_(std::move(host)), comm_(comm), backend_(&backend), compute_(cuda_compute_stream(backend)),
        stream_(std::move(stream)) {
    int nccl_rank = -1, nccl_world = -1;
    NCCL_CHECK(ncclCommUserRank(comm_.get(), &nccl_rank));
    NCCL_CHECK(ncclCommCount(comm_.get(), &nccl_world));
    rank_ = host_->rank();
    world_ = host_->world();
    GPT_CHECK(nccl_rank == rank_ && nccl_world == world_, "nccl: NCCL rank ", nccl_rank, " of ", nccl_world,
              " does not match MPI rank ", rank_, " of ", world_);
    if (!stream_) stream_ = std::make_shared<CommStream>();
    ready_ = make_event();
    hang_source_ = watchdog::add_hang_source({[this] {
                                                if (comm_) check_async(comm_.get(), "a device wait");
                                              },
                                              [this] { return oldest_in_flight(); },
                                              [this] {
                                                if (comm_) ncclCommAbort(comm_.release());
                                              }});
  }
  ~NcclCommunicator() override {
    watchdog::remove_hang_source(hang_source_);
    if (stream_) cudaStreamSynchronize(stream_->stream);  // no throwing here: errors are ignored
  }

  std::string name() const override { return "nccl"; }
  bool stream_ordered() const override { return true; }  // one comm stream, shared with every split
  int rank() const override { return rank_; }
  int world() const override { return world_; }
  int local_rank() const override { return host_->local_rank(); }
  int local_size() const override { return host_->local_size(); }

  WorkPtr all_gather_async(void* out, const void* in, size_t count, DType dt) override;
  WorkPtr reduce_scatter_async(void* out, const void* in, size_t count, DType dt, ReduceOp op) override;
  WorkPtr all_reduce_async(void* buf, size_t count, DType dt, ReduceOp op) override;
  void broadcast(void* buf, size_t bytes, int root) override;
  // Host-side: every rank's host thread reached this point (GPU work already queued may still run).
  void barrier() override { host_->barrier(); }
  double all_reduce_scalar(double x, ReduceOp op) override { return host_->all_reduce_scalar(x, op); }
  double all_reduce_max(double x) override { return host_->all_reduce_max(x); }
  std::unique_ptr<Communicator> split(int color, int key) override;
  // ncclCommAbort drops this rank's NCCL state without waiting for peers; MPI_Abort then ends every rank.
  void abort(int code) override {
    std::fflush(nullptr);
    if (comm_) ncclCommAbort(comm_.release());
    host_->abort(code);
  }

 private:
  // Orders the comm stream after the compute stream, runs `enqueue` (the NCCL call) on the comm stream,
  // records the launch in the ledger and returns the Work that orders the compute stream after it.
  // `kind_name` ("all-gather") and the label name its trace span and its flight record.
  template <typename Enqueue>
  WorkPtr start(CollKind kind, int64_t bytes, const char* what, const char* kind_name, const Enqueue& enqueue) {
    GPT_CHECK(comm_, "nccl ", what, ": the communicator was aborted");
    const std::string label = take_label();
    SharedEvent done(make_event().release(), EventDestroy{});
    CUDA_CHECK(cudaEventRecord(ready_.get(), compute_));
    CUDA_CHECK(cudaStreamWaitEvent(stream_->stream, ready_.get(), 0));
    const bool traced = trace::on();
    if (traced) trace::begin(trace::kCommStream, label.empty() ? kind_name : str(kind_name, " ", label), "comm");
    enqueue();
    if (traced) trace::end(trace::kCommStream);
    check_async(comm_.get(), what);
    CUDA_CHECK(cudaEventRecord(done.get(), stream_->stream));
    ledger_.record(kind, bytes);
    ledger_.add_in_flight(bytes);
    drop_finished_flights();
    flights_.push_back({watchdog::next_issue_order(), done, kind_name, label});
    return std::make_unique<NcclWork>(std::move(done), compute_, comm_.get(), &ledger_, bytes, this);
  }

  // Collectives issued and not known to be done, oldest first (the comm stream runs them in that order).
  struct Flight {
    uint64_t order;
    SharedEvent done;
    const char* kind;   // "all-gather"
    std::string label;  // the engine's unit, or empty
  };
  // Not event_done: the watchdog asks this while it reports a hang, and an error here must not replace that.
  void drop_finished_flights() {
    while (!flights_.empty()) {
      const cudaError_t q = cudaEventQuery(flights_.front().done.get());
      if (q == cudaErrorNotReady) cuda::clear_not_ready();
      if (q != cudaSuccess) return;
      flights_.pop_front();
    }
  }
  watchdog::InFlight oldest_in_flight() {
    drop_finished_flights();
    if (flights_.empty()) return {};
    const Flight& f = flights_.front();
    return {f.order, str("the ", f.kind, f.label.empty() ? "" : " of " + f.label, " (", world_, " ranks)")};
  }

  std::unique_ptr<Communicator> host_;
  CommHandle comm_;
  Backend* backend_;
  cudaStream_t compute_;  // owned by the backend
  StreamHandle stream_;   // the comm stream
  EventHandle ready_;     // re-recorded on the compute stream at every launch
  int rank_ = 0, world_ = 1;
  std::deque<Flight> flights_;
  int hang_source_ = 0;
};

WorkPtr NcclCommunicator::all_gather_async(void* out, const void* in, size_t count, DType dt) {
  const size_t bytes = count * dtype_size(dt);  // per rank
  const bool in_place = in == static_cast<const char*>(out) + rank_ * bytes;
  GPT_CHECK(in_place || !overlaps(out, world_ * bytes, in, bytes), "nccl all_gather: `in` overlaps `out` ",
            "but is not out + rank*count, the only aliasing allowed");
  // out (world*count) = concat over ranks of in (count); NCCL runs in place when in == out + rank*count
  return start(CollKind::all_gather, ring_all_gather_bytes(count, dt, world_), "ncclAllGather", "all-gather", [&] {
    NCCL_CHECK(ncclAllGather(in, out, count, nccl_type(dt), comm_.get(), stream_->stream));
  });
}

WorkPtr NcclCommunicator::reduce_scatter_async(void* out, const void* in, size_t count, DType dt, ReduceOp op) {
  const size_t bytes = count * dtype_size(dt);  // per rank
  const bool in_place = out == static_cast<const char*>(in) + rank_ * bytes;
  GPT_CHECK(in_place || !overlaps(out, bytes, in, world_ * bytes), "nccl reduce_scatter: `out` (", count,
            " elements) overlaps `in` (world*count elements) but is not in + rank*count; use separate buffers");
  // out (count) = reduce over ranks of in[rank*count .. (rank+1)*count); in is (world*count)
  return start(CollKind::reduce_scatter, ring_reduce_scatter_bytes(count, dt, world_), "ncclReduceScatter",
               "reduce-scatter", [&] {
                 NCCL_CHECK(ncclReduceScatter(in, out, count, nccl_type(dt), nccl_op(op), comm_.get(),
                                              stream_->stream));
               });
}

WorkPtr NcclCommunicator::all_reduce_async(void* buf, size_t count, DType dt, ReduceOp op) {
  // buf (count) = reduce over ranks of buf, in place
  return start(CollKind::all_reduce, ring_all_reduce_bytes(count, dt, world_), "ncclAllReduce", "all-reduce", [&] {
    NCCL_CHECK(ncclAllReduce(buf, buf, count, nccl_type(dt), nccl_op(op), comm_.get(), stream_->stream));
  });
}

// Synchronous for the compute stream (ops queued after it see the root's bytes), not for the host.
void NcclCommunicator::broadcast(void* buf, size_t bytes, int root) {
  GPT_CHECK(root >= 0 && root < world_, "nccl broadcast: root ", root, " is not a rank of this group (0..",
            world_ - 1, ")");
  // buf (bytes) = root's buf
  start(CollKind::broadcast, ring_broadcast_bytes(bytes, world_), "ncclBroadcast", "broadcast", [&] {
    NCCL_CHECK(ncclBroadcast(buf, buf, bytes, ncclUint8, root, comm_.get(), stream_->stream));
  })->wait();
}

// Collective over this group: the MPI side and the NCCL side split alike (same color, ordered by key,
// ties by parent rank), so the sub-communicator's ranks agree; the constructor checks it.
std::unique_ptr<Communicator> NcclCommunicator::split(int color, int key) {
  GPT_CHECK(color >= 0, "nccl split: color ", color, " must be >= 0");
  GPT_CHECK(comm_, "nccl split: the communicator was aborted");
  std::unique_ptr<Communicator> host = host_->split(color, key);
  ncclComm_t sub = nullptr;
  NCCL_CHECK(ncclCommSplit(comm_.get(), color, key, &sub, nullptr));
  GPT_CHECK(sub, "nccl split: ncclCommSplit returned no communicator for color ", color);
  return std::make_unique<NcclCommunicator>(std::move(host), sub, *backend_, stream_);  // one stream for both
}

// The per-rank device checks, run before NCCL starts: the backend's device is current on this thread, and
// no two ranks of this node share it (NCCL refuses a GPU used by two ranks of one communicator): with GPU
// local_rank % count per rank, that holds when every local rank is below the GPU count.
void check_rank_device(Backend& backend, int local_rank) {
  const int dev = cuda_backend_device(backend);
  int current = -1, count = 0;
  CUDA_CHECK(cudaGetDevice(&current));
  CUDA_CHECK(cudaGetDeviceCount(&count));
  GPT_CHECK(current == dev, "nccl: the current CUDA device is ", current, " but the cuda backend runs on ", dev,
            " (make the communicator on the thread that made the backend, without cudaSetDevice between)");
  GPT_CHECK(local_rank < count, "nccl: local rank ", local_rank, " has no GPU of its own (", count,
            " visible); NCCL needs one GPU per rank: start at most ", count, " ranks per node");
}

}  // namespace

std::unique_ptr<Communicator> make_nccl_communicator(Communicator& mpi_world, Backend& cuda_backend) {
  // A private copy of the world: the bootstrap broadcast and later scalar calls stay off its ledger.
  std::unique_ptr<Communicator> host = mpi_world.split(0, mpi_world.rank());
  ncclUniqueId id{};
  collective_check(*host, "nccl bootstrap", [&] {
    check_rank_device(cuda_backend, mpi_world.local_rank());
    if (host->rank() == 0) NCCL_CHECK(ncclGetUniqueId(&id));
  });
  host->broadcast(&id, sizeof(id), 0);
  ncclComm_t comm = nullptr;
  NCCL_CHECK(ncclCommInitRank(&comm, host->world(), id, host->rank()));
  return std::make_unique<NcclCommunicator>(std::move(host), comm, cuda_backend);
}

}  // namespace gpt

#endif  // GPT_WITH_NCCL
