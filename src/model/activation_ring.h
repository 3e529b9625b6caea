// Activation offload (--offload activations): what each block keeps between its forward and its backward
// lives in host memory (pinned on cuda), and the device holds only a ring of a few slots, each one layer's
// kept buffers. Layer l uses slot l % slots in both passes.
//  - forward: before the first write of layer l's buffers (block l-1's forward writes its input, the
//    encoder layer 0's), claim(l) makes compute wait for the last copy out of that slot; after block l's
//    forward, offload(l) copies its buffers to the host on the copy stream, overlapping the next blocks.
//  - backward: before block l's recompute and backward, ready(l) makes compute wait for its buffers, and
//    fetch(l-1) starts bringing back the next block's, which overlaps block l's backward (a copy starts after
//    the work queued before it, so the slot's previous layer, later in forward and so done in backward, is
//    no longer read). The last `slots` layers of forward are never evicted from their slots before their
//    backward, so they are neither copied out nor fetched, and have no host copy.
// The copies move bits, so a run with activation offload computes exactly what one without it does.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

#include "src/backend/backend.h"

namespace gpt {

// One kept buffer of a layer: its device copy in the layer's ring slot and its host copy.
struct ActTransfer {
  void* dev = nullptr;   // in the ring slot (device)
  void* host = nullptr;  // the layer's own (alloc_host)
  size_t bytes = 0;
};

class ActivationRing {
 public:
  // per_layer[l]: layer l's kept buffers; slots: the ring's size (layer l in slot l % slots).
  ActivationRing(Backend& be, int slots, std::vector<std::vector<ActTransfer>> per_layer);
  int slots() const { return (int)slots_.size(); }
  // Layer l keeps its slot from its forward to its backward (one of the last `slots` layers): no copies.
  static bool stays(int layer, int layers, int slots) { return layer >= layers - slots; }
  void claim(int layer);    // forward: layer's buffers are about to be written into its slot
  void offload(int layer);  // forward: after block `layer`, its buffers to the host (copy stream) unless it stays
  void fetch(int layer);    // backward: bring `layer`'s buffers back into its slot unless it still holds them
  void ready(int layer);    // backward: compute waits for `layer`'s buffers (fetching them now if needed)

 private:
  struct Slot {
    int holds = -1;       // layer whose buffers the slot has, -1 for none
    uint64_t ticket = 0;  // the last copy into or out of the slot (0: none)
    bool incoming = false;  // that copy brings `holds` back (compute must wait before reading it)
  };
  Slot& slot(int layer) { return slots_[(size_t)layer % slots_.size()]; }
  Backend& be_;
  std::vector<Slot> slots_;
  std::vector<std::vector<ActTransfer>> layers_;  // [layer]
  std::vector<bool> on_host_;                     // [layer]: its host copy is current
};

}  // namespace gpt
