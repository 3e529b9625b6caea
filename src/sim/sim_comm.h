// The simulated machine's communicator: the Communicator interface over a virtual world of N ranks, of which
// this process plays one (rank 0; every rank of an FSDP step does the same work). No byte moves. Each
// collective is recorded in the communication ledger exactly as the real communicators record it (the ring
// accounting of src/dist/comm_volume.h), priced by the alpha-beta network model (src/plan/collectives.h) on
// the links its group spans, and placed on the timeline (src/sim/timeline.h) the way the real one runs:
//  - overlap (NCCL): one comm stream shared by the world and its splits, as src/dist/comm_nccl.cu shares it
//    (hybrid's shard and replica groups queue behind each other); a collective starts when the compute
//    stream has reached it and the stream is free; Work::wait() makes the compute stream wait;
//  - no overlap (OpenMPI without a progress thread, src/dist/comm_mpi.cpp): collectives queue in one FIFO
//    that advances only while the host waits; every byte is exposed, in the order it was started.
// Groups are known by their shape (split_contiguous, split_strided), which is all placement needs: a group
// of `size` ranks `stride` apart has min(size, ceil(R / stride)) of them on rank 0's node of R ranks. Rank 0
// stands for every rank, so a split is priced where its slowest group runs: when rank 0's group sits on its
// node but others straddle a node boundary (R not a multiple of size x stride: --tp 3 on nodes of 8), every
// group's collectives are priced as the straddling ones run, across the network (src/plan/collectives.h).
// Scalar reductions (loss, norm) return their input: a neutral value nothing may branch on.
#pragma once
#include <deque>
#include <memory>

#include "src/dist/communicator.h"
#include "src/plan/collectives.h"
#include "src/sim/timeline.h"

namespace gpt::sim {

struct SimNetwork;  // shared by a world and its splits (sim_comm.cpp)

// net: the links; null prices every collective at 0 (a memory-only plan). overlap: the hardware file's
// network.overlap. stream_ordered: the communicator stood for keeps its collectives on one stream in issue
// order (NCCL, on GPU ranks; not MPI, on CPU ranks), which the engine asks (Communicator::stream_ordered).
// ranks_per_node: R.
std::unique_ptr<Communicator> make_sim_world(int world, int ranks_per_node, Timeline& tl, const NetworkModel* net,
                                             bool overlap, bool stream_ordered);
// Whether groups of `size` ranks `stride` apart (consecutive groups, as split_contiguous forms them) fit a node
// of R ranks for rank 0 but not for every group: some group crosses a node boundary of a world of `world` ranks.
bool group_straddles_nodes(int size, int stride, int ranks_per_node, int world);
// All-gathers started and not yet waited for, over the world and its splits (the prefetch depth in flight).
int sim_gathers_in_flight(Communicator& sim_comm);
// Seconds spent in collectives on the comm streams (hidden or not) since the world was made.
double sim_comm_seconds(Communicator& sim_comm);
// Of those, the all-gathers' seconds.
double sim_gather_seconds(Communicator& sim_comm);
// The collectives that take time (d > 0) since the world was made.
int64_t sim_timed_calls(Communicator& sim_comm);

}  // namespace gpt::sim
