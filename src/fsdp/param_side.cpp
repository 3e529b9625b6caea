// See param_side.h: gather (all-gather a unit's shards into a slot), free (release the slot), prefetch (start
// the gathers of up to K-1 units ahead while this one computes), and the acquire/release order checks.
#include "src/fsdp/param_side.h"

#include <algorithm>

#include "src/core/check.h"
#include "src/util/trace.h"
#include "src/util/watchdog.h"

namespace gpt {

namespace {
const char* pass_name(Pass p) { return p == Pass::forward ? "forward" : "backward"; }
}  // namespace

ParamSide::ParamSide(Backend& be, Communicator& shard_comm, const Layout& layout, const EngineGeometry& geo,
                     StateStore& store, std::function<void()> changed)
    : be_(be), shard_comm_(shard_comm), layout_(layout), geo_(geo), store_(store), changed_(std::move(changed)) {
  units_.resize(geo_.units.size());
  slots_.resize(geo_.gather_slots());
  for (int i = 0; i < (int)slots_.size(); i++)
    slot_buffers(geo_, i, [&](const BufferSpec& b, auto member) { store_.buffers().bind(b, slots_[i].*member); });
  stages_.resize(geo_.upload_stages());
  for (int i = 0; i < (int)stages_.size(); i++)
    stage_buffers(geo_, i, [&](const BufferSpec& b, auto member) { store_.buffers().bind(b, stages_[i].*member); });
  for (Pass p : {Pass::forward, Pass::backward}) {
    std::vector<int> pos(units_.size(), -1);
    const std::vector<int>& order = layout_.pass_order(p);
    for (int i = 0; i < (int)order.size(); i++) pos[order[i]] = i;
    pass_pos_.push_back(pos);
  }
}

bool ParamSide::keeps_after_forward(int u) const {
  return layout_.is_root(u) || geo_.opt.strategy == ShardStrategy::grad_op;
}

// A pass acquires its units in Layout::pass_order; the first unit of the order starts a new pass.
void ParamSide::check_acquire_order(int u, Pass pass) {
  GPT_CHECK(u >= 0 && u < num_units(), "fsdp: acquire of unit ", u, " outside [0, ", num_units(), ")");
  const int pos = pass_pos_[(int)pass][u], last = last_pos_[(int)pass];
  GPT_CHECK(pos == 0 || pos == last + 1, "fsdp: acquire(", name(u), ", ", pass_name(pass), ") out of order: expected ",
            last + 1 < num_units() ? name(layout_.pass_order(pass)[last + 1]) : std::string("a new pass"),
            " (Layout::pass_order)");
  GPT_CHECK(!units_[u].held, "fsdp: acquire(", name(u), ", ", pass_name(pass), ") while it is still held from the ",
            pass_name(units_[u].held_pass), " pass (release it first)");
  last_pos_[(int)pass] = pos;
}

void ParamSide::check_not_held(int u, const char* what) const {
  GPT_CHECK(!units_[u].held, "fsdp: ", what, " while unit ", name(u), " is held by the model (release it first)");
}

// Offload params: a free stage (the root's own, [0]) receives u's shard on the copy stream; nobody waits yet.
int ParamSide::free_stage() const {
  for (int k = 1; k < (int)stages_.size(); k++)
    if (stages_[k].owner < 0) return k;
  return -1;
}

void ParamSide::upload(int u) {
  UnitParams& s = units_[u];
  const int i = layout_.is_root(u) ? 0 : free_stage();
  GPT_CHECK(i >= 0 && stages_[i].owner < 0, "fsdp: no free upload stage for unit ", name(u));
  stages_[i].owner = u;
  s.stage = i;
  s.upload = store_.upload_param(u, stages_[i].data);
}

const float* ParamSide::uploaded(int u) {
  UnitParams& s = units_[u];
  if (s.stage < 0) upload(u);
  be_.wait_copy_device(s.upload);  // the compute stream, here only: where what reads the upload is queued
  return stages_[s.stage].data;
}

void ParamSide::release_stage(int u) {
  UnitParams& s = units_[u];
  if (s.stage < 0) return;
  stages_[s.stage].owner = -1;
  s.stage = -1;
  s.upload = 0;
}

// This rank's shard in the compute dtype on the device, the all-gather's input (G > 1) or what is copied
// into the slot (G = 1 under offload optimizer). Offload params at G = 1 never come here (start_gather).
const void* ParamSide::gather_input(int u, Slot& sl) {
  const size_t n = (size_t)geo_.units[u].shard_numel;
  const float* in_f32 = nullptr;
  if (geo_.opt.offload == OffloadMode::params) {
    in_f32 = uploaded(u);
  } else if (geo_.opt.offload == OffloadMode::optimizer) {
    return store_.device_copy(u);
  } else {
    in_f32 = store_.param(u);
  }
  if (be_.compute_dtype() == DType::F32) return in_f32;  // (offload params: the stage, read until the gather)
  be_.f32_to_compute(sl.stage_c, in_f32, n);
  release_stage(u);  // its reader is queued: a later upload into it waits for that on the copy stream
  return sl.stage_c;
}

void ParamSide::start_gather(int u) {
  UnitParams& s = units_[u];
  if (s.state != State::sharded) return;  // gathered or in flight
  const int slot = layout_.is_root(u) ? kRootSlot : free_rotating_slot();
  GPT_CHECK(slot >= 0 && slots_[slot].owner < 0, "fsdp: no free gather slot for unit ", name(u),
            " (more units held than --gather-slots)");
  Slot& sl = slots_[slot];
  sl.owner = u;
  s.slot = slot;
  s.state = State::gathering;
  if (trace::slot_tracks_on()) trace::begin(trace::kGatherSlot0 + slot, "gather " + name(u), "comm");
  const size_t n = (size_t)geo_.units[u].shard_numel;
  if (geo_.group == 1 && geo_.opt.offload == OffloadMode::params) {  // the shard is the unit: no gather
    const float* staged = uploaded(u);
    if (be_.compute_dtype() == DType::F32) {  // the stage becomes the slot's buffer, and the slot's the stage's
      void* old = sl.data;
      sl.data = stages_[s.stage].data;
      stages_[s.stage].data = static_cast<float*>(old);
    } else {
      be_.f32_to_compute(sl.data, staged, n);
    }
    release_stage(u);
  } else {
    const void* in = gather_input(u, sl);
    if (geo_.group == 1) {
      be_.copy_d2d(sl.data, in, n * be_.compute_size());
    } else {
      shard_comm_.set_label(name(u));
      s.gather_work = shard_comm_.all_gather_async(sl.data, in, n, be_.compute_dtype());
    }
  }
  changed_();
}

void ParamSide::wait_gather(int u) {
  UnitParams& s = units_[u];
  watchdog::beat("all-gather");
  if (s.gather_work) {
    s.gather_work->wait();
    s.gather_work.reset();
  }
  release_stage(u);  // fp32 under offload params: the gather read the stage until now
  if (s.state == State::gathering && trace::slot_tracks_on())
    trace::end(trace::kGatherSlot0 + s.slot);
  s.state = State::gathered;
  changed_();
}

void ParamSide::free_unit(int u) {
  UnitParams& s = units_[u];
  release_stage(u);  // an upload never gathered (its copy is waited for by whatever next waits on the stream)
  if (s.state == State::sharded) return;
  if (s.gather_work) {  // a prefetch that was never used: finish it before the slot is reused
    s.gather_work->wait();
    s.gather_work.reset();
  }
  if (s.state == State::gathering && trace::slot_tracks_on())
    trace::end(trace::kGatherSlot0 + s.slot);
  slots_[s.slot].owner = -1;
  s.slot = -1;
  s.state = State::sharded;
  changed_();
}

void ParamSide::free_all() {
  for (int u = 0; u < num_units(); u++) free_unit(u);
}

void ParamSide::reload(int u) {
  GPT_CHECK(!units_[u].held, "fsdp: unit ", name(u), " is in use by the model while its parameters are loaded");
  free_unit(u);
}

int ParamSide::free_rotating_slot() const {
  for (int i = 0; i < (int)slots_.size(); i++)
    if (i != kRootSlot && slots_[i].owner < 0) return i;
  return -1;
}

double ParamSide::bytes_in_use() const {
  double bytes = 0;
  for (const Slot& sl : slots_)
    if (sl.owner >= 0) bytes += (double)geo_.units[sl.owner].padded * be_.compute_size();
  return bytes;
}

// The prefetch window. After unit u (position p of the pass's order) is acquired, the gathers of the units
// at positions p+1 .. p+K-1 are started (K = --gather-slots), in pass order: the root unit is skipped (it
// has its own slot and is gathered once per step), so are units already gathered or in flight (grad_op's
// kept ones, earlier prefetches), and the window stops at the first unit that finds no free rotating slot,
// so gathers go on the wire in the order they are used. The unit in use holds a slot of its own, so while
// it computes at most K-1 gathers are in flight beyond it; K = 1 prefetches nothing. Acquiring the next
// unit waits for its gather (the oldest in flight) and refills the window by one.
// The window is filled at acquire only, not when release frees a slot: between a release and the next acquire
// the engine runs nothing a gather could overlap (forward: the next acquire follows at once, and after the
// last release of the pass, where the LM head runs, no unit of the pass is left; backward: grad_ready, which
// only starts the unit's reduction, without waiting), so a gather started at the release would begin no
// earlier in useful terms, yet it would go on the wire ahead of that reduction, which the two rotating
// gradient slots need back within two units, sooner than the gather's unit is used (K-1 units on). Nor does
// the window cross into the next pass: a forward does not know whether a backward follows (eval and sample
// run forwards only).
void ParamSide::prefetch_after(int u, Pass pass) {
  const std::vector<int>& order = layout_.pass_order(pass);
  const int pos = pass_pos_[(int)pass][u], end = (int)order.size() - 1;
  if (geo_.group > 1) {  // at G = 1 there is nothing to overlap: the "gather" is a copy or conversion
    for (int j = pos + 1; j <= std::min(end, pos + geo_.opt.gather_slots - 1); j++) {
      const int next = order[j];
      if (layout_.is_root(next) || units_[next].state != State::sharded) continue;
      if (free_rotating_slot() < 0) break;
      start_gather(next);
    }
  }
  if (geo_.opt.offload != OffloadMode::params) return;
  // The upload window, one unit past the gather window (see the header).
  const int ahead = geo_.group > 1 ? geo_.opt.gather_slots : 1;
  for (int j = pos + 1; j <= std::min(end, pos + ahead); j++) {
    const int next = order[j];
    if (layout_.is_root(next) || units_[next].state != State::sharded || units_[next].stage >= 0) continue;
    if (free_stage() < 0) break;
    upload(next);
  }
}

const void* ParamSide::acquire(int u, Pass pass) {
  check_acquire_order(u, pass);
  watchdog::at_unit(name(u));
  UnitParams& s = units_[u];
  s.held = true;
  s.held_pass = pass;
  if (geo_.direct_params) return store_.param(u);
  if (geo_.compute_copy) return store_.device_copy(u);
  if (s.state != State::gathered) {
    start_gather(u);
    wait_gather(u);
  }
  prefetch_after(u, pass);
  return slots_[s.slot].data;
}

void ParamSide::release(int u, Pass pass) {
  GPT_CHECK(u >= 0 && u < num_units() && held_in(u, pass), "fsdp: release(",
            u >= 0 && u < num_units() ? name(u) : std::to_string(u), ", ", pass_name(pass),
            ") of a unit not acquired in that pass");
  units_[u].held = false;
  if (geo_.resident_params()) return;
  if (pass == Pass::forward && keeps_after_forward(u)) return;
  free_unit(u);
}

}  // namespace gpt
