// The --offload flag: a comma list naming where the model states live (optimizer or params, at most one;
// FsdpOptions::offload) and whether the blocks' kept activations go to the host too (activations; the
// model's, model/activation_ring.h). "none" alone is neither.
#pragma once
#include <string>

#include "src/fsdp/options.h"

namespace gpt {

struct OffloadSet {
  OffloadMode states = OffloadMode::none;
  bool activations = false;

  // "none", "optimizer", "params", "activations", "optimizer,activations", "params,activations" (any
  // order). Throws naming --offload.
  static OffloadSet parse(const std::string& s);
  std::string str() const;  // the flag's spelling: parse(str()) == *this
};

}  // namespace gpt
