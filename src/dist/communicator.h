// The communicator: the collectives FSDP needs, synchronous and asynchronous, over a group of ranks.
// Implementations: "single" (world size 1, copies only), "mpi" (OpenMPI, MPI_I* nonblocking calls, for CPU
// ranks) and "nccl" (GPU ranks, bootstrapped through MPI). Buffers are in the backend's device domain.
//
// Every call is recorded in the communication ledger (comm_ledger.h): bytes sent and received per
// collective kind, using the standard ring-algorithm accounting, so tests can assert the FSDP/ZeRO volume
// formulas exactly.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>

#include "src/core/dtype.h"
#include "src/dist/comm_ledger.h"

namespace gpt {

// sum and avg for gradients and activations; max (fp32 only) for the vocab-parallel loss's row maxima.
enum class ReduceOp { sum, avg, max };

// Handle of an in-flight collective. After wait() the result buffer is ready for what comes next: on CPU
// ranks (MPI) wait() blocks the host until then; on GPU ranks (NCCL) it makes the compute stream wait, so
// work queued on that stream afterwards sees the result without a host sync. A Work destroyed without
// wait() waits in its destructor.
class Work {
 public:
  virtual ~Work() = default;
  virtual void wait() = 0;
};
using WorkPtr = std::unique_ptr<Work>;

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual std::string name() const = 0;
  virtual int rank() const = 0;
  virtual int world() const = 0;
  // This rank's index among the ranks of this communicator on the same node (shared memory), 0-based:
  // what picks the rank's GPU (make_backend), whichever launcher started the job.
  virtual int local_rank() const = 0;
  // The ranks of this communicator on this node (they share its host memory: pre-flight counts them).
  virtual int local_size() const = 0;

  // out (world*count) = concat over ranks of in (count); `in` may alias out + rank*count.
  virtual WorkPtr all_gather_async(void* out, const void* in, size_t count, DType dt) = 0;
  // out (count) = reduce over ranks of in[rank*count .. (rank+1)*count); in has world*count elements.
  virtual WorkPtr reduce_scatter_async(void* out, const void* in, size_t count, DType dt, ReduceOp op) = 0;
  // buf (count) = reduce over ranks of buf, in place.
  virtual WorkPtr all_reduce_async(void* buf, size_t count, DType dt, ReduceOp op) = 0;

  void all_gather(void* out, const void* in, size_t count, DType dt) { all_gather_async(out, in, count, dt)->wait(); }
  void reduce_scatter(void* out, const void* in, size_t count, DType dt, ReduceOp op) {
    reduce_scatter_async(out, in, count, dt, op)->wait();
  }
  void all_reduce(void* buf, size_t count, DType dt, ReduceOp op) { all_reduce_async(buf, count, dt, op)->wait(); }
  virtual void broadcast(void* buf, size_t bytes, int root) = 0;
  virtual void barrier() = 0;
  // Scalar helpers on host values (metrics, norms, config hashes); not counted in the ledger's model traffic.
  virtual double all_reduce_scalar(double x, ReduceOp op) = 0;
  virtual double all_reduce_max(double x) = 0;

  // A sub-communicator of the ranks with the same `color`, ordered by `key` (hybrid sharding groups).
  virtual std::unique_ptr<Communicator> split(int color, int key) = 0;
  // The two splits FSDP makes, by their shape: the `size` consecutive ranks around this one (ranks with the
  // same rank / size: a shard group), and the ranks `stride` apart (the same rank % stride: a replica
  // group). Collective, as split is; the simulated machine (src/sim) knows a group only by its shape.
  virtual std::unique_ptr<Communicator> split_contiguous(int size) { return split(rank() / size, rank()); }
  virtual std::unique_ptr<Communicator> split_strided(int stride) { return split(rank() % stride, rank()); }
  // True when this communicator's collectives and its splits' run one after another, in issue order, on one
  // stream, each reading what the ones before it wrote (NCCL's shared comm stream): a collective may then be
  // issued on another's result before that one is waited for. False where each must be waited for first
  // (MPI's requests progress independently).
  virtual bool stream_ordered() const { return false; }
  // Ends every rank's run after a fatal error on this one (MPI_Abort / ncclCommAbort).
  virtual void abort(int code) = 0;

  // What the next collective is for (the FSDP engine names the unit, "blocks3", before each of its
  // collectives); taken by that collective, so a later one without a label has none. The NCCL communicator
  // names the collective's span on the trace's comm-stream track and, should it hang, the hang message with
  // it; the simulated one its predicted span.
  void set_label(std::string what) { label_ = std::move(what); }

  CommLedger& ledger() { return ledger_; }

 protected:
  std::string take_label() { return std::exchange(label_, std::string()); }

  CommLedger ledger_;

 private:
  std::string label_;
};

// The process-wide world communicator: "mpi" when launched under mpirun with more than one rank (or when
// the build has MPI and kind == "mpi"), else "single". Initialises MPI on first use.
std::unique_ptr<Communicator> make_world_communicator(const std::string& kind = "auto");
// Finalises MPI if it was initialised (call once at the end of main).
void finalize_communication();

}  // namespace gpt
