// Which gradient slot a unit's backward writes into (grad_side.cpp). The planner runs the engine itself
// (src/sim), so this rule has one reader.
//
// The rule: a unit keeps filling its own slot while that slot is not yet reducing (recompute and
// accumulation come back to the same unit); otherwise it takes a free slot. Slot 0 belongs to the root unit
// (Layout::root_unit: the tied embeddings, whose gradient arrives last and from two places) and the others to
// the other units.
#pragma once

#include <vector>

namespace gpt {

// The slot unit u is still filling (owned by u and not reducing), or -1.
template <class Slot>
int open_grad_slot(const std::vector<Slot>& slots, int u) {
  for (int i = 0; i < (int)slots.size(); i++)
    if (slots[i].owner == u && !slots[i].reducing) return i;
  return -1;
}

// A free slot for the root unit (slot 0) or another unit (slots 1..), or -1 when none is free.
template <class Slot>
int free_grad_slot(const std::vector<Slot>& slots, bool root) {
  if (root) return slots[0].owner < 0 ? 0 : -1;
  for (int i = 1; i < (int)slots.size(); i++)
    if (slots[i].owner < 0) return i;
  return -1;
}

}  // namespace gpt
