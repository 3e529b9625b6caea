// A pool of slots, each holding one unit's buffers while the unit uses them: the gather slots (param_side.h)
// and the gradient slots (grad_side.h) are two such pools. It owns only the bookkeeping (who holds which
// slot); the sides own the buffers.
//
// Note [slot rotation]
// Slot 0 belongs to the root unit (Note [root unit], param_side.h), which needs its slot from the first use of
// a pass to the last. The other units rotate through slots 1..K: a unit takes any free one and gives it back
// when it is done with it (the gather side at release, the gradient side once the unit's reduction has
// completed), so K slots sized for the largest non-root unit serve every unit, in the order the passes use
// them. When none is free the side makes one free (the gradient side completes its oldest reduction; the
// gather side never needs to, as it only prefetches into free slots). A unit coming back to a slot it still
// holds (recompute, or accumulation before the reduction started) finds it with held_by().
#pragma once
#include <vector>

namespace gpt {

class SlotPool {
 public:
  explicit SlotPool(int slots) : owner_(slots, -1) {}
  int size() const { return (int)owner_.size(); }
  int owner(int slot) const { return owner_[slot]; }
  // A free slot for unit u (slot 0 for the root, else one of 1..), or -1 when none is free.
  int free_slot(bool root) const {
    if (root) return owner_[0] < 0 ? 0 : -1;
    for (int i = 1; i < size(); i++)
      if (owner_[i] < 0) return i;
    return -1;
  }
  void take(int slot, int u) { owner_[slot] = u; }
  void give_back(int slot) { owner_[slot] = -1; }

 private:
  std::vector<int> owner_;  // [slot]: the unit holding it, -1 when free
};

}  // namespace gpt
