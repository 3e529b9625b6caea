// Pieces shared by the two builds of make_world_communicator (comm_single.cpp without MPI, comm_mpi.cpp
// with it): the single-process communicator and the launcher probe that decides "auto".
#pragma once
#include <memory>

#include "src/dist/communicator.h"

namespace gpt {

// A world-size-1 communicator over host memory: collectives are copies, the ledger counts calls at 0 bytes.
std::unique_ptr<Communicator> make_single_communicator();

// The world size announced by an MPI launcher in the environment, or 0 when the process was not started by
// one: OMPI_COMM_WORLD_SIZE (OpenMPI's mpiexec), PMI_SIZE (MPICH/Hydra and other PMI launchers), or, for
// Slurm's srun --mpi=pmix (PMIX_RANK set, no size), SLURM_STEP_NUM_TASKS when it is above 1.
int launcher_world_size();

}  // namespace gpt
