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
  trace::Scope copy(trace::kCopiesD2H, "d2h grad " + name(u), "copy");
  ReducedCopy& c = copies_[slot];
  finish_host_grad(c);  // the previous unit's copy out of this slot, before host_rs is overwritten
  c.d2h = track(be_.copy_d2h_async(c.host_rs, reduced, n * sizeof(float)), true);
  c.reads_device = true;
  c.unit = u;  // added on the host later, while the device runs ahead
}

void StateStore::finish_host_grad(ReducedCopy& c) {
  if (c.unit < 0) return;
  be_.wait_copy_host(c.d2h);
  host_->accumulate_f32(units_[c.unit].grad, c.host_rs, (size_t)geo_.units[c.unit].shard_numel, (float)geo_.world);
  c.unit = -1;
}

void StateStore::finish_host_grads() {
  for (ReducedCopy& c : copies_) finish_host_grad(c);
}

void StateStore::release_copy_source(int slot) {
  ReducedCopy& c = copies_[slot];
  if (!c.reads_device) return;
  be_.wait_copy_device(c.d2h);
  c.reads_device = false;
}

// Copies of each direction finish in issue order, so waiting for the newest of each covers them all;
// afterwards no copy reads any slot (work queued from here on starts after them).
void StateStore::wait_host_copies() {
  for (uint64_t& t : last_copy_) {
    if (t) be_.wait_copy_host(t);
    t = 0;
  }
  for (ReducedCopy& c : copies_) c.reads_device = false;
}

// param_dev <- param in the compute dtype, whichever rule keeps the copy. Compute copy: one conversion on the
// compute stream (the states are on the device). Offload optimizer: a copy-stream copy, waited for by the
// compute stream only (the next gather reads param_dev on it); the host shard it reads is not written again
// before the next finish_backward waits for it.
void StateStore::refresh_device_copy(int u) {
  UnitStates& s = units_[u];
  const size_t n = (size_t)geo_.units[u].shard_numel;
  if (geo_.compute_copy) {
    be_.f32_to_compute(s.param_dev, s.param, n);
    return;
  }
  if (geo_.opt.offload != OffloadMode::optimizer) return;
  if (be_.compute_dtype() == DType::F32) {
    be_.wait_copy_device(track(be_.copy_h2d_async(s.param_dev, s.param, n * sizeof(float)), false));
  } else {
    be_.wait_copy_device(track(be_.copy_h2d_async(refresh_stage_, s.param, n * sizeof(float)), false));
    be_.f32_to_compute(s.param_dev, refresh_stage_, n);
  }
}

void StateStore::zero_grads() {
  for (int u = 0; u < (int)units_.size(); u++)
    states_->zero(units_[u].grad, (size_t)geo_.units[u].shard_numel * sizeof(float));
}

// Every unit's grad shard in one call (one host wait on cuda), summed in unit order.
double StateStore::grad_sumsq() {
  std::vector<const float*> xs;
  std::vector<size_t> ns;
  for (int u = 0; u < (int)units_.size(); u++) {
    xs.push_back(units_[u].grad);
    ns.push_back((size_t)geo_.units[u].shard_numel);
  }
  return states_->sum_squares_all(xs.data(), ns.data(), (int)units_.size());
}

void StateStore::update(const SegmentUpdate& update) {
  for (int u = 0; u < (int)units_.size(); u++) {
    UnitStates& s = units_[u];
    const UnitGeometry& g = geo_.units[u];
    const int64_t lo = g.shard_offset, hi = g.shard_offset + g.shard_numel;
    const std::vector<TensorSpec>& tensors = layout_.unit(u).tensors;
    for (const TensorSpec& t : tensors) {
      // Padding past the last tensor has zero grad: it joins the last tensor's segment (any decay keeps 0).
      const int64_t t_hi = &t == &tensors.back() ? hi : t.offset + t.numel;
      const int64_t a = std::max(lo, t.offset), b = std::min(hi, t_hi);
      if (a >= b) continue;
      const int64_t off = a - lo;
      // The compute copy is written by the update itself, in the same pass over the segment.
      void* out = geo_.compute_copy ? static_cast<char*>(s.param_dev) + off * (int64_t)be_.compute_size() : nullptr;
      update(*states_,
             ShardSegment{s.param + off, out, s.grad + off, s.m + off, s.v + off, (size_t)(b - a), t.weight_decay});
    }
    if (!geo_.compute_copy) refresh_device_copy(u);
  }
}

float* StateStore::state_ptr(int u, ShardState which) {
  if (which != ShardState::param) check_trains("a gradient or Adam shard");
  UnitStates& s = units_[u];
  switch (which) {
    case ShardState::param: return s.param;
    case ShardState::grad: return s.grad;
    case ShardState::adam_m: return s.m;
    case ShardState::adam_v: return s.v;
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
