// The values of each dimension of `gpt plan`'s search (src/plan/plan_search.h), pins applied, per mesh: the
// tensor-parallel sizes T the model and the machine allow (T divides the heads, the padded vocabulary and the
// world, and fits inside a node), and for each the data-parallel dimension's own values (strategies and shard
// groups over world / T ranks, the micro-batches that make up the global batch there). A global batch no mesh
// can split into whole sequences per data-parallel rank is one error line naming the meshes tried.
#pragma once
#include <utility>
#include <vector>

#include "src/plan/plan_search.h"

namespace gpt {

// One tensor-parallel size and what the data-parallel dimension of its mesh can take.
struct MeshSpace {
  int tp = 1;                 // T: ranks per tensor-parallel group
  int dp = 1;                 // world / T: the ranks the engine shards over
  int seqs_per_rank = 0;      // sequences each data-parallel rank takes per optimizer step
  std::vector<bool> sps;      // sequence parallelism: {on, off} for T > 1, {off} for T = 1 (pins applied)
  std::vector<std::pair<ShardStrategy, int>> strategies;  // (strategy, hybrid's G) over the dp ranks
  std::vector<WrapPolicy> wraps;  // blocks:K, K ascending (the last has the fewest units): rule 1's K for T = 1,
                                  // every K under tensor parallelism (plan_search.h)
  std::vector<int> Bs;        // micro-batches: divisors of seqs_per_rank
  std::vector<DType> reduces;
  std::vector<bool> no_syncs;
};

struct PlanSpace {
  std::vector<MeshSpace> meshes;           // T ascending
  std::vector<RecomputePolicy> recomputes; // in order of recompute work, least first
  std::vector<OffloadSet> offloads;
  WrapPolicy coarsest_wrap;                // the fewest units of any mesh's wraps (the same in all)
  std::vector<int> slots;
  int ranks_per_node = 1;                  // R: as the simulated step takes it (TimeModelInput)
};

// Throws gpt::Error with one line for a pinned --tp that cannot split the model or the world, a total batch
// no mesh can split, or a pinned -B that divides no mesh's sequences per rank.
PlanSpace make_plan_space(const PlanRequest& rq);

// Sequence parallelism splits the B*T rows of a micro-batch over the T ranks.
bool sequence_parallel_fits(int tp, int B, int T);

}  // namespace gpt
