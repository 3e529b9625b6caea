// See grad_side.h.
#include "src/fsdp/grad_side.h"

#include "src/core/check.h"
#include "src/fsdp/engine_buffers.h"
#include "src/util/trace.h"
#include "src/util/watchdog.h"

namespace gpt {

GradSide::GradSide(Backend& be, const Layout& layout, const EngineGeometry& geo, StateStore& store,
                   std::unique_ptr<GradReducer> reducer, std::function<void()> changed)
    : be_(be),
      geo_(geo),
      store_(store),
      layout_(layout),
      reducer_(std::move(reducer)),
      changed_(std::move(changed)),
      slots_(geo.grad_slots),
      pool_(geo.grad_slots) {
  for (int i = 0; i < (int)slots_.size(); i++)
    slot_buffers(geo_, i, [&](const BufferSpec& b, auto member) { store_.buffers().bind(b, slots_[i].*member); });
}

// Note [slot rotation] (slot_pool.h): the slot u still fills, else a free one; with none free, the oldest
// reduction in flight is completed until one is.
int GradSide::take_slot(int u) {
  for (int i = 0; i < pool_.size(); i++)
    if (pool_.owner(i) == u && !slots_[i].reducing) return i;
  for (;;) {
    const int free_slot = pool_.free_slot(layout_.is_root(u));
    if (free_slot >= 0) {
      store_.release_copy_source(free_slot);  // the offload copy out of its buffers has finished reading them
      return free_slot;
    }
    GPT_CHECK(!pending_.empty(), "fsdp: no free gradient slot for unit ", name(u));
    const int oldest = pending_.front();
    pending_.pop_front();
    complete_reduction(oldest);
  }
}

float* GradSide::grad_buffer(int u, bool opens) {
  const int i = take_slot(u);
  GradSlot& g = slots_[i];
  if (opens) {
    pool_.take(i, u);
    g.src = g.data;
    be_.zero(g.data, (size_t)geo_.units[u].padded * sizeof(float));
  }
  return g.data;
}

void GradSide::grad_ready(int u) {
  if (!reduces_now()) return;
  const int i = take_slot(u);
  GradSlot& g = slots_[i];
  pool_.take(i, u);
  g.reducing = true;
  g.src = reduction_source(u, g);
  if (trace::slot_tracks_on())
    trace::begin(trace::kReduceSlot0 + i, (geo_.group > 1 ? "reduce-scatter " : "all-reduce ") + name(u), "comm");
  reducer_->start(g, u);
  pending_.push_back(i);
  changed_();
}

void GradSide::complete_reduction(int i) {
  GradSlot& g = slots_[i];
  const int u = pool_.owner(i);
  watchdog::beat("gradient reduction");
  const float* reduced = reducer_->finish(g, u);  // (shard) fp32
  if (trace::slot_tracks_on()) trace::end(trace::kReduceSlot0 + i);
  store_.add_reduced(i, u, reduced);
  after_reduction(u, i);
  pool_.give_back(i);
  g.reducing = false;
  g.src = nullptr;
  changed_();
}

void GradSide::finish() {
  while (!pending_.empty()) {
    const int i = pending_.front();
    pending_.pop_front();
    complete_reduction(i);
  }
  store_.finish_host_grads();  // the host grad shards are complete from here on
}

double GradSide::bytes_in_use() const {
  double bytes = 0;
  for (int i = 0; i < pool_.size(); i++)
    if (pool_.owner(i) >= 0) bytes += (double)geo_.units[pool_.owner(i)].padded * sizeof(float);
  return bytes;
}

}  // namespace gpt
