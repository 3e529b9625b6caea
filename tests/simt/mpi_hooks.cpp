// The blocking MPI calls, through MPI's profiling interface (each calls its PMPI_ twin), for the SIMT emulator
// build with MPI. Why (nccl.cpp): an emulated NCCL collective blocks its rank's host when its stream runs it,
// so before a rank blocks in MPI for any other reason, all its queued device work runs
// (simt::device_synchronize). Every rank then meets its collectives in program order, and a rank never waits
// in MPI for a collective that another rank has queued but not started. Hooked: every call that can wait for
// another rank, whether the project makes it today or not (MPI_Test too: a polling loop must let the device
// work run); the nonblocking starts (MPI_I*) wait for nobody.
#ifdef GPT_WITH_MPI
#include <mpi.h>

#include "tests/simt/streams.h"

namespace simt {
bool mpi_hooks_linked() { return true; }
}  // namespace simt

// int MPI_<name>(params): runs the device's queued work, then PMPI_<name>(args).
#define GPT_SIMT_MPI_HOOK(name, params, args) \
  int MPI_##name params {                     \
    simt::device_synchronize();               \
    return PMPI_##name args;                  \
  }

extern "C" {
GPT_SIMT_MPI_HOOK(Allreduce, (const void* s, void* r, int n, MPI_Datatype t, MPI_Op op, MPI_Comm c),
                  (s, r, n, t, op, c))
GPT_SIMT_MPI_HOOK(Allgather, (const void* s, int sn, MPI_Datatype st, void* r, int rn, MPI_Datatype rt, MPI_Comm c),
                  (s, sn, st, r, rn, rt, c))
GPT_SIMT_MPI_HOOK(Reduce_scatter_block, (const void* s, void* r, int n, MPI_Datatype t, MPI_Op op, MPI_Comm c),
                  (s, r, n, t, op, c))
GPT_SIMT_MPI_HOOK(Reduce, (const void* s, void* r, int n, MPI_Datatype t, MPI_Op op, int root, MPI_Comm c),
                  (s, r, n, t, op, root, c))
GPT_SIMT_MPI_HOOK(Gather,
                  (const void* s, int sn, MPI_Datatype st, void* r, int rn, MPI_Datatype rt, int root, MPI_Comm c),
                  (s, sn, st, r, rn, rt, root, c))
GPT_SIMT_MPI_HOOK(Scatter,
                  (const void* s, int sn, MPI_Datatype st, void* r, int rn, MPI_Datatype rt, int root, MPI_Comm c),
                  (s, sn, st, r, rn, rt, root, c))
GPT_SIMT_MPI_HOOK(Alltoall, (const void* s, int sn, MPI_Datatype st, void* r, int rn, MPI_Datatype rt, MPI_Comm c),
                  (s, sn, st, r, rn, rt, c))
GPT_SIMT_MPI_HOOK(Bcast, (void* b, int n, MPI_Datatype t, int root, MPI_Comm c), (b, n, t, root, c))
GPT_SIMT_MPI_HOOK(Barrier, (MPI_Comm c), (c))
GPT_SIMT_MPI_HOOK(Send, (const void* b, int n, MPI_Datatype t, int dest, int tag, MPI_Comm c), (b, n, t, dest, tag, c))
GPT_SIMT_MPI_HOOK(Recv, (void* b, int n, MPI_Datatype t, int src, int tag, MPI_Comm c, MPI_Status* st),
                  (b, n, t, src, tag, c, st))
GPT_SIMT_MPI_HOOK(Sendrecv,
                  (const void* s, int sn, MPI_Datatype st, int dest, int stag, void* r, int rn, MPI_Datatype rt,
                   int src, int rtag, MPI_Comm c, MPI_Status* status),
                  (s, sn, st, dest, stag, r, rn, rt, src, rtag, c, status))
GPT_SIMT_MPI_HOOK(Probe, (int src, int tag, MPI_Comm c, MPI_Status* st), (src, tag, c, st))
GPT_SIMT_MPI_HOOK(Wait, (MPI_Request * req, MPI_Status* st), (req, st))
GPT_SIMT_MPI_HOOK(Waitall, (int n, MPI_Request reqs[], MPI_Status* st), (n, reqs, st))
GPT_SIMT_MPI_HOOK(Test, (MPI_Request * req, int* flag, MPI_Status* st), (req, flag, st))
GPT_SIMT_MPI_HOOK(Comm_split, (MPI_Comm c, int color, int key, MPI_Comm* out), (c, color, key, out))
GPT_SIMT_MPI_HOOK(Comm_split_type, (MPI_Comm c, int type, int key, MPI_Info info, MPI_Comm* out),
                  (c, type, key, info, out))
GPT_SIMT_MPI_HOOK(Comm_dup, (MPI_Comm c, MPI_Comm* out), (c, out))
GPT_SIMT_MPI_HOOK(Comm_free, (MPI_Comm * c), (c))
GPT_SIMT_MPI_HOOK(Finalize, (), ())
}  // extern "C"

#undef GPT_SIMT_MPI_HOOK
#endif
