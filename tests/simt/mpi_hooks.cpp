// The blocking MPI calls the program makes, through MPI's profiling interface (each calls its PMPI_ twin),
// for the SIMT emulator build with MPI. Why (nccl.cpp): an emulated NCCL collective blocks its rank's host
// when its stream runs it, so before a rank blocks in MPI for any other reason, all its queued device work
// runs (simt::device_synchronize). Every rank then meets its collectives in program order, and a rank never
// waits in MPI for a collective that another rank has queued but not started.
#ifdef GPT_WITH_MPI
#include <mpi.h>

#include "tests/simt/streams.h"

namespace simt {
bool mpi_hooks_linked() { return true; }
}  // namespace simt

extern "C" {

int MPI_Allreduce(const void* sendbuf, void* recvbuf, int count, MPI_Datatype type, MPI_Op op, MPI_Comm comm) {
  simt::device_synchronize();
  return PMPI_Allreduce(sendbuf, recvbuf, count, type, op, comm);
}
int MPI_Barrier(MPI_Comm comm) {
  simt::device_synchronize();
  return PMPI_Barrier(comm);
}
int MPI_Bcast(void* buffer, int count, MPI_Datatype type, int root, MPI_Comm comm) {
  simt::device_synchronize();
  return PMPI_Bcast(buffer, count, type, root, comm);
}
int MPI_Wait(MPI_Request* request, MPI_Status* status) {
  simt::device_synchronize();
  return PMPI_Wait(request, status);
}
int MPI_Comm_split(MPI_Comm comm, int color, int key, MPI_Comm* newcomm) {
  simt::device_synchronize();
  return PMPI_Comm_split(comm, color, key, newcomm);
}
int MPI_Comm_split_type(MPI_Comm comm, int split_type, int key, MPI_Info info, MPI_Comm* newcomm) {
  simt::device_synchronize();
  return PMPI_Comm_split_type(comm, split_type, key, info, newcomm);
}
int MPI_Comm_dup(MPI_Comm comm, MPI_Comm* newcomm) {
  simt::device_synchronize();
  return PMPI_Comm_dup(comm, newcomm);
}
int MPI_Comm_free(MPI_Comm* comm) {
  simt::device_synchronize();
  return PMPI_Comm_free(comm);
}
int MPI_Finalize() {
  simt::device_synchronize();
  return PMPI_Finalize();
}

}  // extern "C"
#endif
