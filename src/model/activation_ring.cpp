// The activation ring's copies and waits (activation_ring.h).
#include "src/model/activation_ring.h"

#include "src/core/check.h"
#include "src/util/trace.h"

namespace gpt {

ActivationRing::ActivationRing(Backend& be, int slots, std::vector<std::vector<ActTransfer>> per_layer)
    : be_(be), slots_((size_t)slots), layers_(std::move(per_layer)), on_host_(layers_.size(), false) {
  GPT_CHECK(slots >= 1, "activation ring: needs a slot");
}

void ActivationRing::claim(int l) {
  Slot& s = slot(l);
  if (s.ticket) be_.wait_copy_device(s.ticket);  // the previous layer's copy to the host has read the slot
  s.ticket = 0;
  s.incoming = false;
  s.holds = l;
  on_host_[l] = false;
}

void ActivationRing::offload(int l) {
  Slot& s = slot(l);
  GPT_CHECK(s.holds == l, "activation ring: offload of layer ", l, " whose slot holds layer ", s.holds);
  if (stays(l, (int)layers_.size(), slots())) return;  // nothing evicts it before its backward
  trace::Scope ts(trace::kCopiesD2H, "d2h activations block", l, "copy");
  for (const ActTransfer& t : layers_[l]) s.ticket = be_.copy_d2h_async(t.host, t.dev, t.bytes);
  s.incoming = false;
  on_host_[l] = true;
}

void ActivationRing::fetch(int l) {
  Slot& s = slot(l);
  if (s.holds == l) return;  // never overwritten since its forward
  GPT_CHECK(on_host_[l], "activation ring: layer ", l, " is neither on the device nor on the host (backward without "
            "its forward)");
  GPT_CHECK(s.holds < 0 || s.holds > l, "activation ring: fetching layer ", l, " over layer ", s.holds,
            ", whose backward has not run");
  trace::Scope ts(trace::kCopies, "h2d activations block", l, "copy");
  for (const ActTransfer& t : layers_[l]) s.ticket = be_.copy_h2d_async(t.dev, t.host, t.bytes);
  s.holds = l;
  s.incoming = true;
}

void ActivationRing::ready(int l) {
  fetch(l);  // a no-op when fetch(l) ran a block ago, or the slot has held the layer since its forward
  Slot& s = slot(l);
  // Not fetched: the slot has held the layer since its forward and no copy is still reading it (a layer
  // copied out was evicted, so fetched). The recompute may rewrite kept values (selective's layernorm
  // statistics) with the same bits.
  if (!s.incoming) return;
  be_.wait_copy_device(s.ticket);
  s.incoming = false;
}

}  // namespace gpt
