// See state_store.h: the model states, their device copies and the offload copies between host and device.
#include "src/fsdp/state_store.h"

#include "src/core/check.h"
#include "src/util/trace.h"

namespace gpt {

StateStore::StateStore(Backend& be, const Layout& layout, const EngineGeometry& geo)
    : be_(be),
      host_(be.host_side()),
      states_(geo.host_states ? host_.get() : &be),
      layout_(layout),
      geo_(geo),
      buffers_(geo, be, *host_) {
  units_.resize(geo_.units.size());
  copies_.resize(geo_.grad_slots);
  for (int u = 0; u < (int)units_.size(); u++)
    unit_buffers(geo_, u, [&](const BufferSpec& b, auto member) { buffers_.bind(b, units_[u].*member); });
  staging_buffers(geo_, [&](const BufferSpec& b, auto member) { buffers_.bind(b, this->*member); });
  for (int i = 0; i < (int)copies_.size(); i++)
    grad_slot_buffers(geo_, i, [&](const BufferSpec& b, auto member) { buffers_.bind(b, copies_[i].*member); });
}

void StateStore::check_trains(const char* what) const {
  GPT_CHECK(!geo_.opt.inference, "fsdp: ", what, " on an inference engine (eval, sample), which holds no ",
            "gradients or optimizer state");
}

uint64_t StateStore::upload_param(int u, float* dst) {
  trace::Scope copy(trace::kCopies, "h2d " + name(u), "copy");
  // On the copy stream, after the previous reader of the staging buffer (queued on compute before now).
  const size_t n = (size_t)geo_.units[u].shard_numel;
  return track(be_.copy_h2d_async(dst, units_[u].param, n * sizeof(float)), false);
}

void StateStore::add_reduced(int slot, int u, const float* reduced) {
  const size_t n = (size_t)geo_.units[u].shard_numel;
  if (!geo_.host_states) {
    be_.accumulate_f32(units_[u].grad, reduced, n, (float)geo_.world);
    return;
  }
  trace::Scope span(trace::kCopiesD2H, "d2h grad " + name(u), "copy");
  ReducedCopy& copy = copies_[slot];
  finish_host_grad(copy);  // the previous unit's copy out of this slot, before host_rs is overwritten
  copy.d2h = track(be_.copy_d2h_async(copy.host_rs, reduced, n * sizeof(float)), true);
  copy.reads_device = true;
  copy.unit = u;  // added on the host later, while the device runs ahead
}

void StateStore::finish_host_grad(ReducedCopy& copy) {
  if (copy.unit < 0) return;
  be_.wait_copy_host(copy.d2h);
  host_->accumulate_f32(units_[copy.unit].grad, copy.host_rs, (size_t)geo_.units[copy.unit].shard_numel, (float)geo_.world);
  copy.unit = -1;
}

void StateStore::finish_host_grads() {
  for (ReducedCopy& copy : copies_) finish_host_grad(copy);
}

void StateStore::release_copy_source(int slot) {
  ReducedCopy& copy = copies_[slot];
  if (!copy.reads_device) return;
  be_.wait_copy_device(copy.d2h);
  copy.reads_device = false;
}

// Copies of each direction finish in issue order, so waiting for the newest of each covers them all;
// afterwards no copy reads any slot (work queued from here on starts after them).
void StateStore::wait_host_copies() {
  for (uint64_t& t : last_copy_) {
    if (t) be_.wait_copy_host(t);
    t = 0;
  }
  for (ReducedCopy& copy : copies_) copy.reads_device = false;
}

// param_dev <- param in the compute dtype, whichever rule keeps the copy. Compute copy: one conversion on the
// compute stream (the states are on the device). Offload optimizer: a copy-stream copy, waited for by the
// compute stream only (the next gather reads param_dev on it); the host shard it reads is not written again
// before the next finish_backward waits for it.
void StateStore::refresh_device_copy(int u) {
  UnitStates& unit = units_[u];
  const size_t n = (size_t)geo_.units[u].shard_numel;
  if (geo_.compute_copy) {
    be_.f32_to_compute(unit.param_dev, unit.param, n);
    return;
  }
  if (geo_.opt.offload != OffloadMode::optimizer) return;
  if (be_.compute_dtype() == DType::F32) {
    be_.wait_copy_device(track(be_.copy_h2d_async(unit.param_dev, unit.param, n * sizeof(float)), false));
  } else {
    be_.wait_copy_device(track(be_.copy_h2d_async(refresh_f32_, unit.param, n * sizeof(float)), false));
    be_.f32_to_compute(unit.param_dev, refresh_f32_, n);
  }
}

void StateStore::zero_grads() {
  for (int u = 0; u < (int)units_.size(); u++)
    states_->zero(units_[u].grad, (size_t)geo_.units[u].shard_numel * sizeof(float));
}

// Every unit's grad shard in one call (one host wait on cuda), summed in unit order.
double StateStore::grad_sumsq(const TensorFilter* counted) {
  std::vector<const float*> xs;
  std::vector<size_t> ns;
  for (int u = 0; u < (int)units_.size(); u++) {
    const UnitGeometry& g = geo_.units[u];
    if (!counted) {
      xs.push_back(units_[u].grad);
      ns.push_back((size_t)g.shard_numel);
      continue;
    }
    for (const SegmentSpan& seg : shard_segments(layout_, u, g.shard_offset, g.shard_numel))
      if ((*counted)(*seg.tensor)) {
        xs.push_back(units_[u].grad + seg.offset);
        ns.push_back((size_t)seg.n);
      }
  }
  return states_->sum_squares_all(xs.data(), ns.data(), (int)xs.size());
}

void StateStore::update(const SegmentUpdate& update) {
  for (int u = 0; u < (int)units_.size(); u++) {
    UnitStates& unit = units_[u];
    const UnitGeometry& g = geo_.units[u];
    for (const SegmentSpan& seg : shard_segments(layout_, u, g.shard_offset, g.shard_numel)) {
      const int64_t o = seg.offset;
      // The compute copy is written by the update itself, in the same pass over the segment.
      void* out = geo_.compute_copy ? static_cast<char*>(unit.param_dev) + o * (int64_t)be_.compute_size() : nullptr;
      update(*states_, ShardSegment{unit.param + o, out, unit.grad + o, unit.m + o, unit.v + o, (size_t)seg.n, seg.decay});
    }
    if (!geo_.compute_copy) refresh_device_copy(u);
  }
}

float* StateStore::state_ptr(int u, ShardState which) {
  if (which != ShardState::param) check_trains("a gradient or Adam shard");
  UnitStates& unit = units_[u];
  switch (which) {
    case ShardState::param: return unit.param;
    case ShardState::grad: return unit.grad;
    case ShardState::adam_m: return unit.m;
    case ShardState::adam_v: return unit.v;
  }
  fail("fsdp: unknown shard state");
}

void StateStore::read(int u, ShardState which, std::vector<float>& out) {
  out.resize((size_t)geo_.units[u].shard_numel);
  states_->copy_d2h(out.data(), state_ptr(u, which), out.size() * sizeof(float));
  states_->synchronize();
}

// No offload copy may still read the host shard rewritten here.
void StateStore::write(int u, ShardState which, const float* in) {
  wait_host_copies();
  states_->copy_h2d(state_ptr(u, which), in, (size_t)geo_.units[u].shard_numel * sizeof(float));
  states_->synchronize();
}

}  // namespace gpt
