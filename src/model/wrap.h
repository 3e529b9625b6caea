// Wrap policy: which blocks form one sharding unit (what fairscale's auto_wrap and FSDP2's per-module
// fully_shard decide). A unit is what the engine gathers, frees and reduces as one flat buffer, so the
// policy trades collectives per step (fewer, larger units) against the gathered bytes held at once (the
// K gather slots are sized for the largest unit).
//   block          one block per unit (the default)
//   blocks:K       K consecutive blocks per unit (the last unit holds the remainder)
//   min-params:N   consecutive blocks grouped until the unit holds at least N parameters, as fairscale's
//                  default_auto_wrap_policy does with min_num_params; the blocks left at the end form the last
//                  unit even when they hold fewer
// In every form the root unit holds the embeddings and the final layernorm (model/layout.h).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace gpt {

struct WrapPolicy {
  enum class Kind { block, blocks, min_params } kind = Kind::block;
  int64_t n = 1;  // K for blocks:K, N for min-params:N
  static constexpr int64_t kMaxN = 1000000000000000;  // 1e15: past any model, and no sum of it overflows

  // "block", "blocks:K" (1 <= K <= 1e6), "min-params:N" (1 <= N <= kMaxN; a suffix k, M or B multiplies by
  // 1e3, 1e6, 1e9). Throws naming --wrap.
  static WrapPolicy parse(const std::string& s);
  std::string str() const;  // the flag's spelling: parse(str()) == *this
  bool operator==(const WrapPolicy& o) const { return kind == o.kind && n == o.n; }
  bool operator!=(const WrapPolicy& o) const { return !(*this == o); }
  // The block groups for L blocks of block_numel parameters each: [i] = the number of blocks in unit i+1
  // (the first block unit), in layer order; they sum to L.
  std::vector<int> groups(int num_layers, int64_t block_numel) const;
};

}  // namespace gpt
