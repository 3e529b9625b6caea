// The NCCL communicator for GPU ranks: one rank per GPU, collectives on a dedicated communication stream
// ordered against the cuda backend's compute stream with events, bootstrapped through the MPI world.
// Available only in builds with NCCL and MPI (GPT_WITH_NCCL); the declaration is hidden otherwise so a
// caller in another build fails at compile time, not at link time.
#pragma once
#include <memory>

#include "src/backend/backend.h"
#include "src/dist/communicator.h"

namespace gpt {

#ifdef GPT_WITH_NCCL
// A communicator over the ranks of `mpi_world` (collective: every rank of mpi_world must call it), moving
// device buffers of `cuda_backend`, which must outlive it. Rank r of the NCCL group is rank r of mpi_world.
// Throws gpt::Error on every rank when any rank lacks a GPU of its own or NCCL fails to start.
std::unique_ptr<Communicator> make_nccl_communicator(Communicator& mpi_world, Backend& cuda_backend);
#endif

}  // namespace gpt
