// Recompute policy: which activations a block keeps for backward and which it re-creates there.
//   none       keep everything (fastest, most memory)
//   full       keep only each block's input; backward re-runs the whole block forward
//   every:K    like full for one block in K (layers l with l % K == 0), none for the others
//   selective  keep the matmul outputs (qkv, fc pre-activation) and the residual; re-run the cheap
//              parts: layernorms, attention softmax/output, gelu
// Recomputed values are produced by the same ops from the same inputs, so results are bit-identical.
#pragma once
#include <string>

namespace gpt {

struct RecomputePolicy {
  enum class Mode { none, full, every, selective } mode = Mode::none;
  int every_k = 1;

  static RecomputePolicy parse(const std::string& s);  // throws gpt::Error naming --recompute
  std::string str() const;
  bool layer_recomputes_all(int layer) const;  // full recompute of this layer
  bool selective() const { return mode == Mode::selective; }
};

}  // namespace gpt
