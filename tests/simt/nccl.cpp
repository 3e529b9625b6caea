// NCCL in the SIMT emulator build. Why: the NCCL communicator (src/dist/comm_nccl.cu) and the FSDP engine
// on GPU ranks would otherwise first run on a multi-GPU machine; here each rank is a process with its own
// emulated GPU, started by mpiexec as for CPU ranks, and its collectives run over MPI.
//   - A communicator is an MPI communicator over the same ranks: ncclCommInitRank splits MPI_COMM_WORLD by
//     the unique id (every world rank starts its communicator together, as make_nccl_communicator does),
//     ncclCommSplit splits the parent's.
//   - A collective is checked at the call and queued on its stream (streams.h), like a kernel: it runs when
//     the stream runs, and the matching MPI call does it then (reductions summed in fp32 and rounded once
//     to the buffer's type; avg is the sum divided by the rank count).
//   - A queued collective blocks its rank's host in MPI when it runs, where a GPU would run it on its own.
//     So every blocking MPI call the program makes first runs all queued device work (mpi_hooks.cpp):
//     ranks then meet in their collectives in program order, and no rank waits in MPI for a collective
//     another rank has queued but not run.
// Without MPI every call fails with ncclInvalidUsage and says why.
#include <cuda_bf16.h>
#include <nccl.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "tests/simt/streams.h"

#ifdef GPT_WITH_MPI
#include <mpi.h>

namespace simt {
bool mpi_hooks_linked();  // mpi_hooks.cpp: referenced so that a program using NCCL links the hooks
}  // namespace simt

struct ncclComm {
  MPI_Comm mpi;
  int rank, size;
  ncclResult_t async = ncclSuccess;  // an MPI failure while a queued collective ran
};

namespace {

std::string& last_error() {
  static std::string text;
  return text;
}
ncclResult_t fail(ncclResult_t r, const std::string& what) {
  last_error() = "NCCL (SIMT emulator over MPI): " + what;
  return r;
}

constexpr char kIdMagic[] = "gpt-simt-nccl-id";

ncclResult_t make_comm(MPI_Comm mpi, ncclComm_t* out) {
  if (mpi == MPI_COMM_NULL) {
    *out = nullptr;
    return ncclSuccess;
  }
  PMPI_Comm_set_errhandler(mpi, MPI_ERRORS_RETURN);
  auto* c = new ncclComm{mpi, 0, 0};
  PMPI_Comm_rank(mpi, &c->rank);
  PMPI_Comm_size(mpi, &c->size);
  *out = c;
  return ncclSuccess;
}

size_t type_bytes(ncclDataType_t t) {
  switch (t) {
    case ncclFloat32:
      return 4;
    case ncclBfloat16:
      return 2;
    case ncclUint8:
    case ncclInt8:
      return 1;
    default:
      return 0;
  }
}

// Elements of `t` as fp32 and back (bf16: rounded to nearest even, once).
std::vector<float> to_f32(const void* p, size_t n, ncclDataType_t t) {
  std::vector<float> v(n);
  if (t == ncclFloat32) {
    std::memcpy(v.data(), p, n * 4);
  } else {
    for (size_t i = 0; i < n; i++) v[i] = __bfloat162float(static_cast<const __nv_bfloat16*>(p)[i]);
  }
  return v;
}
void from_f32(const std::vector<float>& v, void* p, ncclDataType_t t) {
  if (t == ncclFloat32) {
    std::memcpy(p, v.data(), v.size() * 4);
  } else {
    for (size_t i = 0; i < v.size(); i++) static_cast<__nv_bfloat16*>(p)[i] = __float2bfloat16_rn(v[i]);
  }
}

// Checks what every collective needs, then queues `run` on the stream; an MPI failure there becomes the
// communicator's asynchronous error (ncclCommGetAsyncError), as a GPU's would.
template <typename Run>
ncclResult_t queue(ncclComm_t comm, ncclDataType_t t, bool reduces, cudaStream_t stream, const char* what, Run run) {
  if (!comm) return fail(ncclInvalidArgument, std::string(what) + " on a null communicator");
  if (type_bytes(t) == 0 || (reduces && t != ncclFloat32 && t != ncclBfloat16))
    return fail(ncclInvalidArgument, std::string(what) + ": data type " + std::to_string(t) + " not emulated");
  const cudaError_t e = simt::enqueue(stream, [comm, run] {
    if (run() != MPI_SUCCESS) comm->async = ncclSystemError;
  });
  return e == cudaSuccess ? ncclSuccess
                          : fail(ncclInvalidArgument, std::string(what) + " on a stream that is not live");
}

}  // namespace

const char* ncclGetErrorString(ncclResult_t r) {
  switch (r) {
    case ncclSuccess:
      return "no error";
    case ncclInvalidArgument:
      return "invalid argument";
    case ncclInvalidUsage:
      return "invalid usage";
    case ncclSystemError:
      return "system error (an MPI call of the SIMT emulator failed)";
    default:
      return "NCCL error (SIMT emulator)";
  }
}
const char* ncclGetLastError(ncclComm_t) { return last_error().c_str(); }

ncclResult_t ncclGetUniqueId(ncclUniqueId* id) {
  if (!id) return fail(ncclInvalidArgument, "ncclGetUniqueId: null id");
  std::memset(id, 0, sizeof(*id));
  std::memcpy(id->internal, kIdMagic, sizeof(kIdMagic));
  static int32_t made = 0;
  made++;
  std::memcpy(id->internal + sizeof(kIdMagic), &made, sizeof(made));
  return ncclSuccess;
}

ncclResult_t ncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId id, int rank) {
  if (!comm || !simt::mpi_hooks_linked()) return fail(ncclInvalidArgument, "ncclCommInitRank: null communicator");
  if (std::memcmp(id.internal, kIdMagic, sizeof(kIdMagic)) != 0)
    return fail(ncclInvalidArgument, "ncclCommInitRank: the id did not come from ncclGetUniqueId");
  int32_t made = 0;
  std::memcpy(&made, id.internal + sizeof(kIdMagic), sizeof(made));
  MPI_Comm mpi = MPI_COMM_NULL;
  if (PMPI_Comm_split(MPI_COMM_WORLD, made, rank, &mpi) != MPI_SUCCESS)
    return fail(ncclSystemError, "ncclCommInitRank: MPI_Comm_split of MPI_COMM_WORLD failed");
  const ncclResult_t r = make_comm(mpi, comm);
  if (r != ncclSuccess) return r;
  if ((*comm)->size != nranks || (*comm)->rank != rank)
    return fail(ncclInvalidUsage, "ncclCommInitRank: rank " + std::to_string(rank) + " of " + std::to_string(nranks) +
                                      " asked for, but the MPI world gives rank " + std::to_string((*comm)->rank) +
                                      " of " + std::to_string((*comm)->size));
  return ncclSuccess;
}

ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t* newcomm, ncclConfig_t*) {
  if (!comm || !newcomm) return fail(ncclInvalidArgument, "ncclCommSplit: null communicator");
  MPI_Comm mpi = MPI_COMM_NULL;
  if (PMPI_Comm_split(comm->mpi, color < 0 ? MPI_UNDEFINED : color, key, &mpi) != MPI_SUCCESS)
    return fail(ncclSystemError, "ncclCommSplit: MPI_Comm_split failed");
  return make_comm(mpi, newcomm);
}

// The MPI communicator stays until MPI_Finalize: freeing it is collective, and ranks destroy their
// communicators at different moments.
ncclResult_t ncclCommDestroy(ncclComm_t comm) {
  delete comm;
  return ncclSuccess;
}
ncclResult_t ncclCommAbort(ncclComm_t comm) { return ncclCommDestroy(comm); }
ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* state) {
  if (!comm || !state) return fail(ncclInvalidArgument, "ncclCommGetAsyncError: null argument");
  *state = comm->async;
  return ncclSuccess;
}
ncclResult_t ncclCommUserRank(const ncclComm_t comm, int* rank) {
  if (!comm || !rank) return fail(ncclInvalidArgument, "ncclCommUserRank: null argument");
  *rank = comm->rank;
  return ncclSuccess;
}
ncclResult_t ncclCommCount(const ncclComm_t comm, int* count) {
  if (!comm || !count) return fail(ncclInvalidArgument, "ncclCommCount: null argument");
  *count = comm->size;
  return ncclSuccess;
}

// recv (size*count) = every rank's send (count), in rank order; in place when send == recv + rank*count.
ncclResult_t ncclAllGather(const void* send, void* recv, size_t count, ncclDataType_t t, ncclComm_t comm,
                           cudaStream_t stream) {
  const int bytes = static_cast<int>(count * type_bytes(t));
  return queue(comm, t, false, stream, "ncclAllGather", [=] {
    const bool in_place = send == static_cast<const char*>(recv) + static_cast<size_t>(comm->rank) * bytes;
    return PMPI_Allgather(in_place ? MPI_IN_PLACE : send, bytes, MPI_BYTE, recv, bytes, MPI_BYTE, comm->mpi);
  });
}

// recv (count) = the reduction over ranks of send[rank*count, (rank+1)*count); send is (size*count).
ncclResult_t ncclReduceScatter(const void* send, void* recv, size_t count, ncclDataType_t t, ncclRedOp_t op,
                               ncclComm_t comm, cudaStream_t stream) {
  return queue(comm, t, true, stream, "ncclReduceScatter", [=] {
    const std::vector<float> in = to_f32(send, count * comm->size, t);  // a copy: send may hold recv
    std::vector<float> out(count);
    const int rc =
        PMPI_Reduce_scatter_block(in.data(), out.data(), static_cast<int>(count), MPI_FLOAT, MPI_SUM, comm->mpi);
    if (op == ncclAvg)
      for (float& x : out) x /= static_cast<float>(comm->size);
    from_f32(out, recv, t);
    return rc;
  });
}

// recv (count) = the reduction over ranks of send (count).
ncclResult_t ncclAllReduce(const void* send, void* recv, size_t count, ncclDataType_t t, ncclRedOp_t op,
                           ncclComm_t comm, cudaStream_t stream) {
  return queue(comm, t, true, stream, "ncclAllReduce", [=] {
    std::vector<float> v = to_f32(send, count, t);
    const int rc = PMPI_Allreduce(MPI_IN_PLACE, v.data(), static_cast<int>(count), MPI_FLOAT, MPI_SUM, comm->mpi);
    if (op == ncclAvg)
      for (float& x : v) x /= static_cast<float>(comm->size);
    from_f32(v, recv, t);
    return rc;
  });
}

// recv (count) = root's send (count).
ncclResult_t ncclBroadcast(const void* send, void* recv, size_t count, ncclDataType_t t, int root, ncclComm_t comm,
                           cudaStream_t stream) {
  if (comm && (root < 0 || root >= comm->size))
    return fail(ncclInvalidArgument, "ncclBroadcast: root " + std::to_string(root) + " is not a rank");
  const size_t bytes = count * type_bytes(t);
  return queue(comm, t, false, stream, "ncclBroadcast", [=] {
    if (comm->rank == root && send != recv) std::memmove(recv, send, bytes);
    return PMPI_Bcast(recv, static_cast<int>(bytes), MPI_BYTE, root, comm->mpi);
  });
}

#else  // no MPI: nothing to run collectives over

namespace {
constexpr const char* kWhy = "NCCL is emulated over MPI in the SIMT build, and this build has no MPI";
ncclResult_t no() { return ncclInvalidUsage; }
}  // namespace

const char* ncclGetErrorString(ncclResult_t) { return kWhy; }
const char* ncclGetLastError(ncclComm_t) { return kWhy; }
ncclResult_t ncclGetUniqueId(ncclUniqueId*) { return no(); }
ncclResult_t ncclCommInitRank(ncclComm_t*, int, ncclUniqueId, int) { return no(); }
ncclResult_t ncclCommSplit(ncclComm_t, int, int, ncclComm_t*, ncclConfig_t*) { return no(); }
ncclResult_t ncclCommDestroy(ncclComm_t) { return no(); }
ncclResult_t ncclCommAbort(ncclComm_t) { return no(); }
ncclResult_t ncclCommGetAsyncError(ncclComm_t, ncclResult_t*) { return no(); }
ncclResult_t ncclCommUserRank(const ncclComm_t, int*) { return no(); }
ncclResult_t ncclCommCount(const ncclComm_t, int*) { return no(); }
ncclResult_t ncclAllGather(const void*, void*, size_t, ncclDataType_t, ncclComm_t, cudaStream_t) { return no(); }
ncclResult_t ncclReduceScatter(const void*, void*, size_t, ncclDataType_t, ncclRedOp_t, ncclComm_t, cudaStream_t) {
  return no();
}
ncclResult_t ncclAllReduce(const void*, void*, size_t, ncclDataType_t, ncclRedOp_t, ncclComm_t, cudaStream_t) {
  return no();
}
ncclResult_t ncclBroadcast(const void*, void*, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t) { return no(); }

#endif
