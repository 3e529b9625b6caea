// See collectives.h.
#include "src/plan/collectives.h"

#include <algorithm>

#include "src/core/check.h"
#include "src/dist/comm_volume.h"

namespace gpt {

int64_t collective_bytes(CollKind kind, size_t count, DType dt, int group) {
  switch (kind) {
    case CollKind::all_gather: return ring_all_gather_bytes(count, dt, group);
    case CollKind::reduce_scatter: return ring_reduce_scatter_bytes(count, dt, group);
    case CollKind::all_reduce: return ring_all_reduce_bytes(count, dt, group);
    case CollKind::broadcast: return ring_broadcast_bytes(count * dtype_size(dt), group);
    case CollKind::count: break;
  }
  fail("collective_bytes: bad collective kind ", (int)kind);
}

int collective_steps(CollKind kind, int group) {
  return kind == CollKind::all_reduce ? 2 * (group - 1) : group - 1;
}

NetworkModel::NetworkModel(const HardwareSpec& hw, int ranks_per_node) : hw_(hw), ranks_per_node_(ranks_per_node) {
  for (const MeasuredNetwork& m : hw.measured)
    if (m.ranks == ranks_per_node) measured_ = &m;
  if (measured_) {
    describe_ = str("fits measured with ", measured_->ranks, " ranks on this node (", hw.file, ")");
  } else {
    std::string rings;
    for (const IntraRing& r : hw.intra_rings)
      rings += str(rings.empty() ? "" : ", ", r.ranks, " GPUs ", r.bandwidth / 1e9, " GB/s");
    describe_ = str("intra-node ", hw.intra.bandwidth / 1e9, " GB/s per rank",
                    hw.intra_topology == IntraTopology::none ? std::string()
                                                             : str(" (", intra_topology_name(hw.intra_topology),
                                                                   rings.empty() ? "" : ": rings of " + rings, ")"),
                    ", ", hw.intra.latency * 1e6, " us/step; inter-node ", hw.inter.bandwidth / 1e9, " GB/s per node, ",
                    hw.inter.latency * 1e6, " us/step");
    if (!hw.measured.empty())
      describe_ += str(" (no fit measured at ", ranks_per_node, " ranks per node; the file has fits for ",
                       hw.measured.front().ranks, hw.measured.size() > 1 ? ", ..." : "", ")");
  }
}

Link NetworkModel::intra_ring(int group) const {
  if (hw_.intra_topology != IntraTopology::hybrid_cube_mesh || group < 2) return hw_.intra;
  std::string listed;
  for (const IntraRing& r : hw_.intra_rings) {
    if (r.ranks == group) return Link{r.bandwidth, hw_.intra.latency};
    listed += str(listed.empty() ? "" : ", ", r.ranks);
  }
  fail("--hardware ", hw_.file, ": field network.intra_rings has no ring of ", group, " GPUs (it lists ", listed,
       "): a group of ", group, " ranks on one node of this hybrid cube mesh cannot be priced");
}

Link NetworkModel::link(CollKind kind, int group, int group_per_node, DType dt, double network_share) const {
  if (measured_) {
    if (dt == DType::BF16 && measured_->has_bf16) {
      if (kind == CollKind::reduce_scatter) return measured_->reduce_scatter_bf16;
      if (kind == CollKind::all_reduce) return measured_->all_reduce_bf16;
    }
    switch (kind) {
      case CollKind::all_gather: return measured_->links.all_gather;
      case CollKind::reduce_scatter: return measured_->links.reduce_scatter;
      default: return measured_->links.all_reduce;
    }
  }
  if (group <= group_per_node) return intra_ring(group);  // the whole group on one node
  Link l;
  const double share = network_share > 0 ? network_share
                                         : (double)std::max(1, group_per_node) / std::max(1, ranks_per_node_);
  l.bandwidth = std::min(intra_ring(group_per_node).bandwidth, hw_.inter.bandwidth * share);
  l.latency = hw_.inter.latency;
  return l;
}

double NetworkModel::seconds(CollKind kind, int64_t bytes, int group, int group_per_node, DType dt,
                             double network_share) const {
  if (group <= 1) return 0;
  const Link l = link(kind, group, group_per_node, dt, network_share);
  return l.latency * collective_steps(kind, group) + (double)bytes / l.bandwidth;
}

double NetworkModel::scalar_seconds(int group, int group_per_node, double network_share) const {
  if (group <= 1) return 0;
  const Link l = link(CollKind::all_reduce, group, group_per_node, DType::F32, network_share);
  return l.latency * collective_steps(CollKind::all_reduce, group) + 16.0 / l.bandwidth;
}

}  // namespace gpt
