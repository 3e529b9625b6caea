// `gpt bench --calibrate --out FILE`: measures this machine into a hardware file for the time model
// (src/plan/hardware.h). On the CPU backend's own floor (kernels/cpu and its OpenBLAS):
//  - gemm: cpu::matmul_forward's sgemm at products from M*N*K = 1e4 to 3e9 (rows of 256, the model's B*T
//    of the common benches; cube-shaped below that), best of the median over passes;
//  - gemm_tasks: 8 x threads single-threaded products in one OpenMP loop, the shapes of the attention's
//    per-head blocks (64 x n x 64, 64 x 64 x n);
//  - stream: an OpenMP loop out = a + b (the residual's shape, 12 bytes per element) from 12 KB to 192 MB;
//  - copy: std::memcpy (what the cpu backend's copies are) from 4 KB to 64 MB.
// Every rank runs the same measurements at once, so a profile records what a rank gets while R ranks
// share the cores: run it without mpirun first (1 rank, every core), then `mpirun -n R` for each rank count
// you will run; those runs add their profile and, through the world communicator, the alpha-beta fits of
// all_gather, reduce_scatter and all_reduce at R ranks, to the same file. Without mpirun the network is left
// at placeholder values and the file says so.
#pragma once
#include <string>

#include "src/dist/communicator.h"

namespace gpt {

// quick: fewer sizes and passes (seconds, for tests). Rank 0 writes `out` (merged with what is there).
void run_calibration(Communicator& world, const std::string& out, bool quick, bool json);

}  // namespace gpt
