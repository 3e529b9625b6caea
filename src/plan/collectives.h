// The collective model: what one collective of the engine sends (the ring accounting of
// src/dist/comm_volume.h, the same functions the communicators record in the ledger) and how long it
// takes on a hardware file's links, in the alpha-beta ring model:
//   time = latency * steps + bytes_sent_per_rank / bandwidth
//   steps: all_gather and reduce_scatter G-1, all_reduce 2(G-1) (reduce-scatter + all-gather), G the group
// Hierarchy (hybrid sharding, tensor parallelism, or any group that spans nodes): a group whose ranks all
// sit on one node runs on the node's links, by the file's intra-node topology (hardware.h): on an NVSwitch
// node at network.intra's bandwidth whatever its size, on a hybrid cube mesh at the ring bandwidth the file
// lists for a group of its size (a size it does not list is an error). A group spanning nodes is a ring
// through the nodes; with NCCL's one ring per network interface the traffic that leaves a node is one
// rank's share, carried by the node's whole network, so a rank's bandwidth is
// min(intra ring of r, inter_per_node * share), share = r / R by default: R ranks on a node, r of them in
// this group (r = R for a full-world ring, r = 1 for hybrid's replica groups, whose R concurrent rings
// share the node's network). A caller that knows better passes the share (src/sim/sim_comm.cpp: a group
// that straddles a node boundary shares it with the rings crossing the node's other boundary). Latency per
// step is the inter-node one.
// Calibrated fits (network.measured, CPU ranks on this machine) replace the links for their rank count; a
// reduction in bf16 takes the file's bf16 fit where it has one (MPI sums bf16 in a user-defined op, at its own
// speed per byte), and the fp32 fit by bytes otherwise (NCCL's bf16 sum is native).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

#include "src/core/dtype.h"
#include "src/dist/comm_ledger.h"
#include "src/plan/hardware.h"

namespace gpt {

// Ring bytes one rank sends for the engine's call: all_gather(count per rank), reduce_scatter(count per
// rank out), all_reduce(count) over a group of `group` ranks (comm_volume.h).
int64_t collective_bytes(CollKind kind, size_t count, DType dt, int group);
int collective_steps(CollKind kind, int group);

class NetworkModel {
 public:
  // ranks_per_node: the run's ranks on one node (R).
  NetworkModel(const HardwareSpec& hw, int ranks_per_node);
  // group: ranks in the collective; group_per_node: how many of them share a node (r; a group inside a
  // node has r = group). dt: the elements' dtype (a bf16 reduction may have its own fit). network_share:
  // the share of a node's network this ring gets when it spans nodes (0: r / R).
  double seconds(CollKind kind, int64_t bytes, int group, int group_per_node, DType dt = DType::F32,
                 double network_share = 0) const;
  // The latency of a small scalar all-reduce (loss, gradient norm) over `group` ranks.
  double scalar_seconds(int group, int group_per_node, double network_share = 0) const;
  // The link a ring over `group` ranks of one node runs on (its bandwidth by the intra-node topology,
  // network.intra's latency). Throws, naming the file, for a size a hybrid cube mesh's intra_rings lacks.
  Link intra_ring(int group) const;
  const std::string& describe() const { return describe_; }

 private:
  Link link(CollKind kind, int group, int group_per_node, DType dt, double network_share) const;
  const HardwareSpec& hw_;
  int ranks_per_node_;
  const MeasuredNetwork* measured_ = nullptr;
  std::string describe_;
};

}  // namespace gpt
