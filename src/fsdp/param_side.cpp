// See param_side.h.
#include "src/fsdp/param_side.h"

#include <algorithm>

#include "src/core/check.h"
#include "src/fsdp/engine_buffers.h"
#include "src/util/trace.h"
#include "src/util/watchdog.h"

namespace gpt {

ParamSide::ParamSide(Backend& be, Communicator& shard_comm, const Layout& layout, const EngineGeometry& geo,
                     const EngineBuffers& buffers, ShardSource& source, std::function<void()> changed)
    : be_(be),
      shard_comm_(shard_comm),
      layout_(layout),
      geo_(geo),
      source_(source),
      changed_(std::move(changed)),
      units_(geo.units.size()),
      slots_(geo.gather_slots()),
      pool_(geo.gather_slots()) {
  for (int i = 0; i < (int)slots_.size(); i++)
    slot_buffers(geo_, i, [&](const BufferSpec& b, auto member) { buffers.bind(b, slots_[i].*member); });
}

const void* ParamSide::acquire(int u, Pass pass) {
  watchdog::at_unit(name(u));
  if (units_[u].state != State::gathered) {
    unshard(u);
    wait_for_unshard(u);
  }
  prefetch_after(u, pass);
  return slots_[units_[u].slot].data;
}

void ParamSide::release(int u, Pass pass) {
  if (pass == Pass::forward && kept_for_backward(u)) return;
  reshard(u);
}

bool ParamSide::kept_for_backward(int u) const {
  return layout_.is_root(u) || geo_.opt.strategy == ShardStrategy::grad_op;
}

void ParamSide::unshard(int u) {
  UnitGather& x = units_[u];
  if (x.state != State::sharded) return;  // gathered or in flight
  const int i = pool_.free_slot(layout_.is_root(u));
  GPT_CHECK(i >= 0, "fsdp: no free gather slot for unit ", name(u), " (more units held than --gather-slots)");
  pool_.take(i, u);
  x.slot = i;
  x.state = State::gathering;
  if (trace::slot_tracks_on()) trace::begin(trace::kGatherSlot0 + i, "gather " + name(u), "comm");
  GatherSlot& slot = slots_[i];
  if (geo_.group == 1) {
    source_.fill_slot(u, slot);  // the shard is the whole unit: no collective
  } else {
    const void* mine = source_.send_buffer(u, slot);  // (shard) compute dtype
    shard_comm_.set_label(name(u));
    x.gather = shard_comm_.all_gather_async(slot.data, mine, (size_t)geo_.units[u].shard_numel, be_.compute_dtype());
  }
  changed_();
}

void ParamSide::wait_for_unshard(int u) {
  UnitGather& x = units_[u];
  watchdog::beat("all-gather");
  if (x.gather) {
    x.gather->wait();
    x.gather.reset();
  }
  source_.gathered(u);  // the gather has read its input
  if (x.state == State::gathering && trace::slot_tracks_on()) trace::end(trace::kGatherSlot0 + x.slot);
  x.state = State::gathered;
  changed_();
}

void ParamSide::reshard(int u) {
  UnitGather& x = units_[u];
  source_.resharded(u);  // an upload never gathered is dropped (a later copy into its stage queues behind it)
  if (x.state == State::sharded) return;
  if (x.gather) {  // a prefetch that was never used: finish it before the slot is reused
    x.gather->wait();
    x.gather.reset();
  }
  if (x.state == State::gathering && trace::slot_tracks_on()) trace::end(trace::kGatherSlot0 + x.slot);
  pool_.give_back(x.slot);
  x.slot = -1;
  x.state = State::sharded;
  changed_();
}

void ParamSide::free_all() {
  for (int u = 0; u < (int)units_.size(); u++) reshard(u);
}

double ParamSide::bytes_in_use() const {
  double bytes = 0;
  for (int i = 0; i < pool_.size(); i++)
    if (pool_.owner(i) >= 0) bytes += (double)geo_.units[pool_.owner(i)].padded * be_.compute_size();
  return bytes;
}

// Note [prefetch window] (param_side.h); then the source's own window (Note [upload window]).
void ParamSide::prefetch_after(int u, Pass pass) {
  const std::vector<int>& order = layout_.pass_order(pass);
  const int pos = layout_.pass_position(pass, u), end = (int)order.size() - 1;
  if (geo_.group > 1) {
    for (int j = pos + 1; j <= std::min(end, pos + geo_.opt.gather_slots - 1); j++) {
      const int next = order[j];
      if (layout_.is_root(next) || units_[next].state != State::sharded) continue;
      if (pool_.free_slot(false) < 0) break;
      unshard(next);
    }
  }
  source_.prefetch_after(order, pos, [this](int v) { return units_[v].state == State::sharded; });
}

}  // namespace gpt
