// The single-process communicator (world size 1). Every collective over one rank is the identity, so
// all_gather and reduce_scatter copy `in` to `out` when they are different buffers, all_reduce and avg do
// nothing, and the ledger counts each call at 0 bytes (nothing leaves the process). Buffers are host
// memory: the CPU backend's device domain. A one-GPU run uses it too: with one rank the engine's shard is
// the whole unit, so it never calls all_gather or reduce_scatter, and all_reduce and broadcast touch no
// buffer (a device pointer passed to copy() would not be host memory).
//
// Builds without MPI also define make_world_communicator / finalize_communication here; builds with MPI
// define them in comm_mpi.cpp.
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "src/core/check.h"
#include "src/dist/comm_world.h"

namespace gpt {
namespace {

// A collective that finished when it was started.
class DoneWork : public Work {
 public:
  void wait() override {}
};

class SingleCommunicator : public Communicator {
 public:
  std::string name() const override { return "single"; }
  int rank() const override { return 0; }
  int world() const override { return 1; }
  int local_rank() const override { return 0; }
  int local_size() const override { return 1; }

  WorkPtr all_gather_async(void* out, const void* in, size_t count, DType dt) override {
    copy(out, in, count * dtype_size(dt), "all_gather");
    ledger_.record(CollKind::all_gather, 0);
    return std::make_unique<DoneWork>();
  }
  WorkPtr reduce_scatter_async(void* out, const void* in, size_t count, DType dt, ReduceOp op) override {
    copy(out, in, count * dtype_size(dt), "reduce_scatter");
    ledger_.record(CollKind::reduce_scatter, 0);
    return std::make_unique<DoneWork>();
  }
  WorkPtr all_reduce_async(void* buf, size_t count, DType dt, ReduceOp op) override {
    GPT_CHECK(buf || count == 0, "single all_reduce: null buffer for ", count, " elements");
    ledger_.record(CollKind::all_reduce, 0);
    return std::make_unique<DoneWork>();
  }
  void broadcast(void* buf, size_t bytes, int root) override {
    GPT_CHECK(root == 0, "single broadcast: root ", root, " is not a rank of a world of size 1 (expected 0)");
    ledger_.record(CollKind::broadcast, 0);
  }
  void barrier() override {}
  double all_reduce_scalar(double x, ReduceOp op) override { return x; }
  double all_reduce_max(double x) override { return x; }

  std::unique_ptr<Communicator> split(int color, int key) override {
    GPT_CHECK(color >= 0, "single split: color ", color, " must be >= 0");
    return std::make_unique<SingleCommunicator>();
  }
  void abort(int code) override {
    std::fflush(nullptr);
    std::exit(code);
  }

 private:
  // out (bytes) = in (bytes); memmove because a caller may pass overlapping views of one buffer.
  static void copy(void* out, const void* in, size_t bytes, const char* what) {
    if (bytes == 0 || out == in) return;
    GPT_CHECK(out && in, "single ", what, ": null buffer for ", bytes, " bytes");
    std::memmove(out, in, bytes);
  }
};

int env_int(const char* name) {
  const char* v = std::getenv(name);
  return v && *v ? std::atoi(v) : 0;
}

}  // namespace

std::unique_ptr<Communicator> make_single_communicator() { return std::make_unique<SingleCommunicator>(); }

int launcher_world_size() {
  if (int n = env_int("OMPI_COMM_WORLD_SIZE"); n > 0) return n;
  if (int n = env_int("PMI_SIZE"); n > 0) return n;
  // A PMIx launcher (srun --mpi=pmix) puts no size in the environment, and every task of a Slurm step, MPI
  // or not, and all it starts inherit PMIX_RANK (a shell from srun --pty, a driver script): only a step of
  // more than one task is taken as a launch, so two processes never claim one MPI rank.
  const int slurm = env_int("SLURM_STEP_NUM_TASKS");
  return std::getenv("PMIX_RANK") != nullptr && slurm > 1 ? slurm : 0;
}

#ifndef GPT_WITH_MPI
std::unique_ptr<Communicator> make_world_communicator(const std::string& kind) {
  if (kind == "single") return make_single_communicator();
  GPT_CHECK(kind != "mpi",
            "communicator \"mpi\" requested but this build has no MPI: install libopenmpi-dev and rebuild "
            "(cmake -DGPT_MPI=ON)");
  GPT_CHECK(kind == "auto", "unknown communicator \"", kind, "\" (expected auto, mpi or single)");
  int launched = launcher_world_size();
  GPT_CHECK(launched <= 1, "launched by mpiexec with ", launched,
            " ranks but this build has no MPI, so every rank would train alone: install libopenmpi-dev "
            "and rebuild, or run a single process");
  return make_single_communicator();
}

void finalize_communication() {}
#endif

}  // namespace gpt
