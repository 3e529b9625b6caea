// The 2D mesh: world = DP x TP, tensor-parallel innermost. Consecutive ranks form a tensor-parallel group (so a
// group of up to a node's ranks stays inside the node, on its fastest links), and the ranks with the same
// tensor-parallel rank, tp apart, form a data-parallel group: the FSDP engine's world, which its strategies
// shard over (and, with --shard hybrid, split again). Rank r is (dp, tp) = (r / tp, r % tp).
#pragma once
#include <memory>

#include "src/dist/communicator.h"

namespace gpt {

struct Mesh {
  std::unique_ptr<Communicator> tp;  // the tp consecutive ranks sharing every block
  std::unique_ptr<Communicator> dp;  // the world / tp ranks holding the same slices: the engine's world
};

// Collective over `world` (every rank calls it). tp must divide the world size (checked by the caller's
// one-line error first; here only as an internal check).
Mesh make_mesh(Communicator& world, int tp);

}  // namespace gpt
