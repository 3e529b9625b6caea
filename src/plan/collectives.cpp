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
    describe_ = str("intra-node ", hw.intra.bandwidth / 1e9, " GB/s per rank, ", hw.intra.latency * 1e6,
                    " us/step; inter-node ", hw.inter.bandwidth / 1e9, " GB/s per node, ", hw.inter.latency * 1e6,
                    " us/step");
    if (!hw.measured.empty())
      describe_ += str(" (no fit measured at ", ranks_per_node, " ranks per node; the file has fits for ",
                       hw.measured.front().ranks, hw.measured.size() > 1 ? ", ..." : "", ")");
  }
}

Link NetworkModel::link(CollKind kind, int group, int group_per_node, DType dt) const {
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
  if (group <= group_per_node) return hw_.intra;  // the whole group on one node
  Link l;
  const double share = (double)std::max(1, group_per_node) / std::max(1, ranks_per_node_);
  l.bandwidth = std::min(hw_.intra.bandwidth, hw_.inter.bandwidth * share);
  l.latency = hw_.inter.latency;
  return l;
}

double NetworkModel::seconds(CollKind kind, int64_t bytes, int group, int group_per_node, DType dt) const {
  if (group <= 1) return 0;
  const Link l = link(kind, group, group_per_node, dt);
  return l.latency * collective_steps(kind, group) + (double)bytes / l.bandwidth;
}

double NetworkModel::scalar_seconds(int group, int group_per_node) const {
  if (group <= 1) return 0;
  const Link l = link(CollKind::all_reduce, group, group_per_node, DType::F32);
  return l.latency * collective_steps(CollKind::all_reduce, group) + 16.0 / l.bandwidth;
}

}  // namespace gpt
