// The per-step mechanics of FsdpEngine: gather (all-gather a unit's shards into a slot), free (release the
// slot), prefetch (start the gathers of up to K-1 units ahead while this one computes), and the gradient path
// (full-unit grad slot -> reduce-scatter summed over the shard group -> [all-reduce summed across replica
// groups] -> divided by the world size as it is added into the fp32 grad shard, on the host when states are
// offloaded). With --reduce-dtype bf16 the reductions run on a bf16 copy of the slot, widened back to fp32
// before the add.
// Offload copies run on the backend's copy stream, ordered by tickets (events), never by stream syncs:
// a gather's host->device copy is waited for by the compute stream only; a reduced shard's copy to the
// host is waited for by the host only when that slot's host buffer is needed again or at finish_backward.
// Every entry point checks the call order it expects (engine.h) and throws naming the unit otherwise.
#include <algorithm>
#include <string>
#include <vector>

#include "src/core/check.h"
#include "src/fsdp/engine.h"
#include "src/fsdp/grad_slot_rule.h"
#include "src/util/trace.h"
#include "src/util/watchdog.h"

namespace gpt {

namespace {
const char* pass_name(Pass p) { return p == Pass::forward ? "forward" : "backward"; }
}  // namespace

bool FsdpEngine::keeps_after_forward(int u) const {
  return u == layout_.embed_unit() || geo_.opt.strategy == ShardStrategy::grad_op;
}

// A pass acquires its units in Layout::pass_order; the first unit of the order starts a new pass.
void FsdpEngine::check_acquire_order(int u, Pass pass) {
  GPT_CHECK(u >= 0 && u < num_units(), "fsdp: acquire of unit ", u, " outside [0, ", num_units(), ")");
  const int pos = pass_pos_[(int)pass][u], last = last_pos_[(int)pass];
  GPT_CHECK(pos == 0 || pos == last + 1, "fsdp: acquire(", name(u), ", ", pass_name(pass), ") out of order: expected ",
            last + 1 < num_units() ? name(layout_.pass_order(pass)[last + 1]) : std::string("a new pass"),
            " (Layout::pass_order)");
  GPT_CHECK(!units_[u].held, "fsdp: acquire(", name(u), ", ", pass_name(pass), ") while it is still held from the ",
            pass_name(units_[u].held_pass), " pass (release it first)");
  last_pos_[(int)pass] = pos;
}

void FsdpEngine::start_gather(int u) {
  Unit& s = units_[u];
  if (s.state != ParamState::sharded) return;  // gathered or in flight
  const int slot = u == layout_.embed_unit() ? 0 : free_rotating_slot();
  GPT_CHECK(slot >= 0 && slots_[slot].owner < 0, "fsdp: no free gather slot for unit ", name(u),
            " (more units held than --gather-slots)");
  Slot& sl = slots_[slot];
  sl.owner = u;
  s.slot = slot;
  s.state = ParamState::gathering;
  trace::begin(trace::kGatherSlot0 + slot, "gather " + name(u), "comm");
  const size_t n = (size_t)geo_.units[u].shard_numel;
  // The all-gather input: this rank's shard in compute dtype, on the device.
  const void* in = nullptr;
  const float* in_f32 = nullptr;
  if (geo_.opt.offload == OffloadMode::params) {
    trace::Scope copy(trace::kCopies, "h2d " + name(u), "copy");
    // On the copy stream, after the previous reader of the staging buffer; the conversion waits for it.
    be_.wait_copy_device(track(be_.copy_h2d_async(sl.stage_f32, s.param, n * sizeof(float))));
    in_f32 = sl.stage_f32;
  } else if (geo_.opt.offload == OffloadMode::optimizer) {
    in = s.param_dev;
  } else {
    in_f32 = s.param;
  }
  if (in_f32) {
    if (be_.compute_dtype() == DType::F32) {
      in = in_f32;
    } else {
      be_.f32_to_compute(sl.stage_c, in_f32, n);
      in = sl.stage_c;
    }
  }
  if (geo_.group == 1) {
    be_.copy_d2d(sl.data, in, n * be_.compute_size());
  } else {
    s.gather_work = shard_comm_->all_gather_async(sl.data, in, n, be_.compute_dtype());
  }
  trace_counters();
}

void FsdpEngine::trace_counters() {
  if (!trace::on()) return;
  double params = 0, grads = 0;
  for (const Slot& sl : slots_)
    if (sl.owner >= 0) params += (double)geo_.units[sl.owner].padded * be_.compute_size();
  for (const GradSlot& g : gslots_)
    if (g.owner >= 0) grads += (double)geo_.units[g.owner].padded * sizeof(float);
  trace::counter("gathered params in use", params);
  trace::counter("gradient slots in use", grads);
  trace::counter("comm bytes in flight", (double)(shard_comm_->ledger().in_flight() + replica_comm_->ledger().in_flight()));
}

void FsdpEngine::wait_gather(int u) {
  Unit& s = units_[u];
  watchdog::beat("all-gather");
  if (s.gather_work) {
    s.gather_work->wait();
    s.gather_work.reset();
  }
  if (s.state == ParamState::gathering) trace::end(trace::kGatherSlot0 + s.slot);
  s.state = ParamState::gathered;
  trace_counters();
}

void FsdpEngine::free_unit(int u) {
  Unit& s = units_[u];
  if (s.state == ParamState::sharded) return;
  if (s.gather_work) {  // a prefetch that was never used: finish it before the slot is reused
    s.gather_work->wait();
    s.gather_work.reset();
  }
  if (s.state == ParamState::gathering) trace::end(trace::kGatherSlot0 + s.slot);
  slots_[s.slot].owner = -1;
  s.slot = -1;
  s.state = ParamState::sharded;
  trace_counters();
}

void FsdpEngine::free_all_units() {
  for (int u = 0; u < num_units(); u++) free_unit(u);
}

int FsdpEngine::free_rotating_slot() const {
  for (int i = 1; i < (int)slots_.size(); i++)
    if (slots_[i].owner < 0) return i;
  return -1;
}

// The prefetch window. After unit u (position p of the pass's order) is acquired, the gathers of the units
// at positions p+1 .. p+K-1 are started (K = --gather-slots), in pass order: the root unit is skipped (it
// has its own slot and is gathered once per step), so are units already gathered or in flight (grad_op's
// kept ones, earlier prefetches), and the window stops at the first unit that finds no free rotating slot,
// so gathers go on the wire in the order they are used. The unit in use holds a slot of its own, so while
// it computes at most K-1 gathers are in flight beyond it; K = 1 prefetches nothing. Acquiring the next
// unit waits for its gather (the oldest in flight) and refills the window by one.
// The window is filled at acquire only, not when release frees a slot: between a release and the next acquire
// the engine runs nothing a gather could overlap (forward: the next acquire follows at once, and after head's
// release, where the LM head runs, no unit of the pass is left; backward: grad_ready, which only starts the
// unit's reduction, without waiting), so a gather started at the release would begin no earlier in useful
// terms, yet it would go on the wire ahead of that reduction, which the two rotating gradient slots need back
// within two units, sooner than the gather's unit is used (K-1 units on). Nor does the window cross into the
// next pass: a forward does not know whether a backward follows (eval and sample run forwards only).
void FsdpEngine::prefetch_after(int u, Pass pass) {
  if (geo_.group == 1) return;  // nothing to overlap: the "gather" is a local copy
  const std::vector<int>& order = layout_.pass_order(pass);
  const int pos = pass_pos_[(int)pass][u];
  const int last = std::min((int)order.size() - 1, pos + geo_.opt.gather_slots - 1);
  for (int j = pos + 1; j <= last; j++) {
    const int next = order[j];
    if (next == layout_.embed_unit() || units_[next].state != ParamState::sharded) continue;
    if (free_rotating_slot() < 0) return;
    start_gather(next);
  }
}

const void* FsdpEngine::acquire(int u, Pass pass) {
  if (pass == Pass::backward) check_trains("a backward");
  check_acquire_order(u, pass);
  watchdog::at_unit(name(u));
  Unit& s = units_[u];
  s.held = true;
  s.held_pass = pass;
  if (geo_.direct_params) return s.param;
  if (geo_.compute_copy) return s.param_dev;
  if (s.state != ParamState::gathered) {
    start_gather(u);
    wait_gather(u);
  }
  prefetch_after(u, pass);
  return slots_[s.slot].data;
}

void FsdpEngine::release(int u, Pass pass) {
  GPT_CHECK(u >= 0 && u < num_units() && units_[u].held && units_[u].held_pass == pass, "fsdp: release(",
            u >= 0 && u < num_units() ? name(u) : std::to_string(u), ", ", pass_name(pass),
            ") of a unit not acquired in that pass");
  units_[u].held = false;
  if (geo_.resident_params()) return;
  if (pass == Pass::forward && keeps_after_forward(u)) return;
  free_unit(u);
}

// The slot unit u is filling, or a free one (completing the oldest reductions until one frees up).
int FsdpEngine::take_grad_slot(int u) {
  const int open = open_grad_slot(gslots_, u);
  if (open >= 0) return open;
  const bool root = u == layout_.embed_unit();
  for (;;) {
    const int free_slot = free_grad_slot(gslots_, root);
    if (free_slot >= 0) {
      release_copy_source(gslots_[free_slot]);
      return free_slot;
    }
    GPT_CHECK(!pending_.empty(), "fsdp: no free gradient slot for unit ", name(u));
    int oldest = pending_.front();
    pending_.pop_front();
    complete_reduction(gslots_[oldest]);
  }
}

float* FsdpEngine::grad_buffer(int u) {
  Unit& s = units_[u];
  GPT_CHECK(s.held && s.held_pass == Pass::backward, "fsdp: grad_buffer(", name(u),
            ") outside its backward (between acquire(", name(u), ", backward) and grad_ready)");
  const bool fresh = s.grad_state == GradState::idle;
  s.grad_state = GradState::accumulating;
  if (geo_.direct_grads) return s.grad;
  if (geo_.opt.no_sync) return s.nosync_acc;
  GradSlot& g = gslots_[take_grad_slot(u)];
  if (fresh) {
    g.owner = u;
    g.src = g.data;
    be_.zero(g.data, (size_t)geo_.units[u].padded * sizeof(float));
  }
  return g.data;
}

void FsdpEngine::grad_ready(int u) {
  Unit& s = units_[u];
  GPT_CHECK(s.grad_state == GradState::accumulating, "fsdp: grad_ready(", name(u),
            ") without a grad_buffer since its last grad_ready");
  s.grad_state = GradState::idle;
  if (geo_.direct_grads || (geo_.opt.no_sync && !last_micro_)) return;  // nothing to reduce (yet)
  const UnitGeometry& ug = geo_.units[u];
  const int i = take_grad_slot(u);
  GradSlot& g = gslots_[i];
  g.owner = u;
  g.reducing = true;
  if (geo_.opt.no_sync) g.src = s.nosync_acc;
  trace::begin(trace::kReduceSlot0 + i, (geo_.group > 1 ? "reduce-scatter " : "all-reduce ") + name(u), "comm");
  if (geo_.bf16_reduce) {
    be_.f32_to_bf16(g.send_bf16, g.src, (size_t)ug.padded);  // (padded) fp32 -> bf16, nearest-even
    if (geo_.group > 1)
      g.work = shard_comm_->reduce_scatter_async(g.recv_bf16, g.send_bf16, (size_t)ug.shard_numel, DType::BF16,
                                                 ReduceOp::sum);
    else
      g.work = replica_comm_->all_reduce_async(g.send_bf16, (size_t)ug.padded, DType::BF16, ReduceOp::sum);
  } else if (geo_.group > 1) {
    g.work = shard_comm_->reduce_scatter_async(g.rs_out, g.src, (size_t)ug.shard_numel, DType::F32, ReduceOp::sum);
  } else {
    g.work = replica_comm_->all_reduce_async(g.src, (size_t)ug.padded, DType::F32, ReduceOp::sum);
  }
  if (geo_.group > 1 && replica_comm_->world() > 1 && shard_comm_->stream_ordered()) {
    void* out = geo_.bf16_reduce ? g.recv_bf16 : static_cast<void*>(g.rs_out);  // (shard) the reduce-scatter's result
    g.replica_work = replica_comm_->all_reduce_async(out, (size_t)ug.shard_numel,
                                                     geo_.bf16_reduce ? DType::BF16 : DType::F32, ReduceOp::sum);
  }
  pending_.push_back(i);
  trace_counters();
}

void FsdpEngine::complete_reduction(GradSlot& g) {
  const int u = g.owner;
  Unit& s = units_[u];
  watchdog::beat("gradient reduction");
  if (g.work) {
    g.work->wait();
    g.work.reset();
  }
  float* reduced = reduced_f32(g);
  trace::end(trace::kReduceSlot0 + (int)(&g - gslots_.data()));
  const size_t n = (size_t)geo_.units[u].shard_numel;
  if (geo_.host_states) {
    trace::Scope copy(trace::kCopies, "d2h grad " + name(u), "copy");
    finish_host_grad(g);  // the previous unit's copy out of this slot, before host_rs is overwritten
    g.d2h = track(be_.copy_d2h_async(g.host_rs, reduced, n * sizeof(float)));
    g.d2h_reads_slot = true;
    g.host_unit = u;  // added on the host later, while the device runs ahead
  } else {
    be_.accumulate_f32(s.grad, reduced, n, grad_ranks());
  }
  if (g.src == s.nosync_acc) {
    release_copy_source(g);  // when G = 1 the copy reads the accumulator itself
    be_.zero(s.nosync_acc, (size_t)geo_.units[u].padded * sizeof(float));
  }
  g.owner = -1;
  g.reducing = false;
  g.src = nullptr;
  trace_counters();
}

// After the slot's collective: the hybrid replica all-reduce (same dtype), then widening from bf16.
float* FsdpEngine::reduced_f32(GradSlot& g) {
  const size_t n = (size_t)geo_.units[g.owner].shard_numel;  // equals padded when G = 1
  const bool bf16 = geo_.bf16_reduce, sharded = geo_.group > 1;
  float* f32 = sharded ? g.rs_out : g.src;             // (n) fp32: the result the grad shard receives
  void* out = !bf16 ? static_cast<void*>(f32) : sharded ? g.recv_bf16 : g.send_bf16;  // (n) collective's result
  if (g.replica_work) {  // issued behind the reduce-scatter (grad_ready)
    g.replica_work->wait();
    g.replica_work.reset();
  } else if (sharded && replica_comm_->world() > 1) {
    replica_comm_->all_reduce(out, n, bf16 ? DType::BF16 : DType::F32, ReduceOp::sum);
  }
  if (bf16) be_.bf16_to_f32(f32, out, n);
  return f32;
}

void FsdpEngine::finish_host_grad(GradSlot& g) {
  if (g.host_unit < 0) return;
  be_.wait_copy_host(g.d2h);
  host_->accumulate_f32(units_[g.host_unit].grad, g.host_rs, (size_t)geo_.units[g.host_unit].shard_numel,
                        grad_ranks());
  g.host_unit = -1;
}

void FsdpEngine::release_copy_source(GradSlot& g) {
  if (!g.d2h_reads_slot) return;
  be_.wait_copy_device(g.d2h);
  g.d2h_reads_slot = false;
}

// Copies finish in issue order, so waiting for the newest covers them all; afterwards no copy reads any
// slot (work queued from here on starts after them).
void FsdpEngine::wait_host_copies() {
  if (last_copy_) be_.wait_copy_host(last_copy_);
  last_copy_ = 0;
  for (GradSlot& g : gslots_) g.d2h_reads_slot = false;
}

void FsdpEngine::check_quiet(const char* what) const {
  for (int u = 0; u < num_units(); u++) {
    GPT_CHECK(!units_[u].held, "fsdp: ", what, " while unit ", name(u), " is held by the model (release it first)");
    GPT_CHECK(units_[u].grad_state == GradState::idle, "fsdp: ", what, " while unit ", name(u),
              " has a gradient without its grad_ready");
  }
  GPT_CHECK(pending_.empty(), "fsdp: ", what, " while gradient reductions are in flight (finish_backward first)");
}

void FsdpEngine::check_trains(const char* what) const {
  GPT_CHECK(!geo_.opt.inference, "fsdp: ", what, " on an inference engine (eval, sample), which holds no ",
            "gradients or optimizer state");
}

void FsdpEngine::begin_step() {
  check_trains("begin_step");
  check_quiet("begin_step");
  free_all_units();  // what eval or sample left gathered: a step starts fully sharded
  for (int u = 0; u < num_units(); u++)
    states_->zero(units_[u].grad, (size_t)geo_.units[u].shard_numel * sizeof(float));
}

void FsdpEngine::begin_micro_step(bool last_micro_step) { last_micro_ = last_micro_step; }

void FsdpEngine::finish_backward() {
  while (!pending_.empty()) {
    int i = pending_.front();
    pending_.pop_front();
    complete_reduction(gslots_[i]);
  }
  for (GradSlot& g : gslots_) finish_host_grad(g);  // the host grad shards are complete from here on
  wait_host_copies();  // and no copy still reads a host shard the optimizer is about to write
}

// Every unit's grad shard in one call (one host wait on cuda), summed in unit order.
double FsdpEngine::grad_sumsq() {
  check_trains("grad_sumsq");
  check_quiet("grad_sumsq");
  std::vector<const float*> xs;
  std::vector<size_t> ns;
  for (int u = 0; u < num_units(); u++) {
    xs.push_back(units_[u].grad);
    ns.push_back((size_t)geo_.units[u].shard_numel);
  }
  const double local = states_->sum_squares_all(xs.data(), ns.data(), num_units());
  return geo_.group > 1 ? shard_comm_->all_reduce_scalar(local, ReduceOp::sum) : local;
}

void FsdpEngine::update_params(const std::function<void(Backend& states, const ShardSegment&)>& update) {
  check_trains("update_params");
  check_quiet("update_params");
  free_all_units();  // gathered copies of the old parameters
  for (int u = 0; u < num_units(); u++) {
    Unit& s = units_[u];
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

// param_dev <- param in the compute dtype, whichever rule keeps the copy. Compute copy: one conversion on the
// compute stream (the states are on the device). Offload optimizer: a copy-stream copy, waited for by the
// compute stream only (the next gather reads param_dev on it); the host shard it reads is not written again
// before the next finish_backward waits for it.
void FsdpEngine::refresh_device_copy(int u) {
  Unit& s = units_[u];
  const size_t n = (size_t)geo_.units[u].shard_numel;
  if (geo_.compute_copy) {
    be_.f32_to_compute(s.param_dev, s.param, n);
    return;
  }
  if (geo_.opt.offload != OffloadMode::optimizer) return;
  if (be_.compute_dtype() == DType::F32) {
    be_.wait_copy_device(track(be_.copy_h2d_async(s.param_dev, s.param, n * sizeof(float))));
  } else {
    be_.wait_copy_device(track(be_.copy_h2d_async(refresh_stage_, s.param, n * sizeof(float))));
    be_.f32_to_compute(s.param_dev, refresh_stage_, n);
  }
}

}  // namespace gpt
