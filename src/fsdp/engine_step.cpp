// The per-step mechanics of FsdpEngine: gather (all-gather a unit's shards into a slot), free (release
// the slot), prefetch (start the next unit's gather while this one computes), and the gradient path
// (full-unit grad slot -> reduce-scatter averaged over the shard group -> [all-reduce across replica
// groups] -> add into the fp32 grad shard, on the host when states are offloaded). With --reduce-dtype
// bf16 the reductions run on a bf16 copy of the slot, widened back to fp32 before the add.
// Offload copies run on the backend's copy stream, ordered by tickets (events), never by stream syncs:
// a gather's host->device copy is waited for by the compute stream only; a reduced shard's copy to the
// host is waited for by the host only when that slot's host buffer is needed again or at finish_backward.
#include <cstring>

#include "src/core/check.h"
#include "src/fsdp/engine.h"
#include "kernels/cpu/ops.h"
#include "src/util/trace.h"

namespace gpt {

bool FsdpEngine::keeps_after_forward(int u) const {
  return u == layout_.embed_unit() || opt_.strategy == ShardStrategy::grad_op;
}

void FsdpEngine::start_gather(int u) {
  UnitShard& s = units_[u];
  if (s.slot >= 0) return;  // gathered or in flight
  int slot = -1;
  if (u == layout_.embed_unit()) {
    slot = 0;
  } else {
    for (int i = 1; i < (int)slots_.size() && slot < 0; i++)
      if (slots_[i].owner < 0) slot = i;
  }
  GPT_CHECK(slot >= 0 && slots_[slot].owner < 0, "fsdp: no free gather slot for unit ", layout_.unit(u).name,
            " (acquire/release out of order)");
  Slot& sl = slots_[slot];
  sl.owner = u;
  s.slot = slot;
  s.gathered = false;
  trace::begin(trace::kGatherSlot0 + slot, "gather " + layout_.unit(u).name, "comm");
  const size_t n = (size_t)s.shard_numel;
  // The all-gather input: this rank's shard in compute dtype, on the device.
  const void* in = nullptr;
  const float* in_f32 = nullptr;
  if (opt_.offload == OffloadMode::params) {
    trace::Scope copy(trace::kCopies, "h2d " + layout_.unit(u).name, "copy");
    // On the copy stream, after the previous reader of the staging buffer; the conversion waits for it.
    be_.wait_copy_device(track(be_.copy_h2d_async(sl.stage_f32, s.param, n * sizeof(float))));
    in_f32 = sl.stage_f32;
  } else if (opt_.offload == OffloadMode::optimizer) {
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
  if (group_ == 1) {
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
    if (sl.owner >= 0) params += (double)units_[sl.owner].padded * be_.compute_size();
  for (const GradSlot& g : gslots_)
    if (g.owner >= 0) grads += (double)units_[g.owner].padded * sizeof(float);
  trace::counter("gathered params in use", params);
  trace::counter("gradient slots in use", grads);
  trace::counter("comm bytes in flight", (double)(shard_comm_->ledger().in_flight() + replica_comm_->ledger().in_flight()));
}

void FsdpEngine::wait_gather(int u) {
  UnitShard& s = units_[u];
  if (s.gather_work) {
    s.gather_work->wait();
    s.gather_work.reset();
  }
  if (!s.gathered) trace::end(trace::kGatherSlot0 + s.slot);
  s.gathered = true;
  trace_counters();
}

void FsdpEngine::free_unit(int u) {
  UnitShard& s = units_[u];
  if (s.slot < 0) return;
  if (s.gather_work) {  // a prefetch that was never used: finish it before the slot is reused
    s.gather_work->wait();
    s.gather_work.reset();
  }
  if (!s.gathered) trace::end(trace::kGatherSlot0 + s.slot);
  slots_[s.slot].owner = -1;
  s.slot = -1;
  s.gathered = false;
  trace_counters();
}

void FsdpEngine::prefetch_after(int u, Pass pass) {
  if (group_ == 1) return;  // nothing to overlap: the "gather" is a local copy
  const int root = layout_.embed_unit(), head = layout_.head_unit();
  int next = -1;
  if (pass == Pass::forward) {
    next = u == head ? -1 : u + 1;
  } else {
    next = u == root ? head : (u > 1 ? u - 1 : -1);
  }
  if (next < 0 || next == root || units_[next].slot >= 0) return;
  for (int i = 1; i < (int)slots_.size(); i++) {
    if (slots_[i].owner < 0) {
      start_gather(next);
      return;
    }
  }
}

const void* FsdpEngine::acquire(int u, Pass pass) {
  UnitShard& s = units_[u];
  if (direct_params()) return s.param;
  if (!s.gathered) {
    start_gather(u);
    wait_gather(u);
  }
  prefetch_after(u, pass);
  return slots_[s.slot].data;
}

void FsdpEngine::release(int u, Pass pass) {
  if (direct_params()) return;
  if (pass == Pass::forward && keeps_after_forward(u)) return;
  free_unit(u);
}

void FsdpEngine::on_params_updated() {
  for (int u = 0; u < (int)units_.size(); u++) free_unit(u);
}

// The slot unit u is filling, or a free one (completing the oldest reductions until one frees up).
int FsdpEngine::take_grad_slot(int u) {
  for (int i = 0; i < (int)gslots_.size(); i++)
    if (gslots_[i].owner == u && !gslots_[i].reducing) return i;
  const bool root = u == layout_.embed_unit();
  for (;;) {
    int free_slot = -1;
    if (root) {
      if (gslots_[0].owner < 0) free_slot = 0;
    } else {
      for (int i = 1; i < (int)gslots_.size() && free_slot < 0; i++)
        if (gslots_[i].owner < 0) free_slot = i;
    }
    if (free_slot >= 0) {
      release_copy_source(gslots_[free_slot]);
      return free_slot;
    }
    GPT_CHECK(!pending_.empty(), "fsdp: no free gradient slot for unit ", layout_.unit(u).name);
    int oldest = pending_.front();
    pending_.pop_front();
    complete_reduction(gslots_[oldest]);
  }
}

float* FsdpEngine::grad_buffer(int u) {
  UnitShard& s = units_[u];
  if (direct_grads()) return s.grad;
  if (opt_.no_sync) return s.nosync_acc;
  const int i = take_grad_slot(u);
  GradSlot& g = gslots_[i];
  if (g.owner != u) {
    g.owner = u;
    g.src = g.data;
    be_.zero(g.data, (size_t)s.padded * sizeof(float));
  }
  return g.data;
}

void FsdpEngine::grad_ready(int u) {
  if (direct_grads()) return;
  if (opt_.no_sync && !last_micro_) return;  // keep accumulating locally
  UnitShard& s = units_[u];
  const int i = take_grad_slot(u);
  GradSlot& g = gslots_[i];
  g.owner = u;
  g.reducing = true;
  if (opt_.no_sync) g.src = s.nosync_acc;
  trace::begin(trace::kReduceSlot0 + i, (group_ > 1 ? "reduce-scatter " : "all-reduce ") + layout_.unit(u).name, "comm");
  if (bf16_reduce()) {
    be_.f32_to_bf16(g.send_bf16, g.src, (size_t)s.padded);  // (padded) fp32 -> bf16, nearest-even
    if (group_ > 1)
      g.work = shard_comm_->reduce_scatter_async(g.recv_bf16, g.send_bf16, (size_t)s.shard_numel, DType::BF16,
                                                 ReduceOp::avg);
    else
      g.work = replica_comm_->all_reduce_async(g.send_bf16, (size_t)s.padded, DType::BF16, ReduceOp::avg);
  } else if (group_ > 1) {
    g.work = shard_comm_->reduce_scatter_async(g.rs_out, g.src, (size_t)s.shard_numel, DType::F32, ReduceOp::avg);
  } else {
    g.work = replica_comm_->all_reduce_async(g.src, (size_t)s.padded, DType::F32, ReduceOp::avg);
  }
  pending_.push_back(i);
  trace_counters();
}

void FsdpEngine::complete_reduction(GradSlot& g) {
  const int u = g.owner;
  UnitShard& s = units_[u];
  if (g.work) {
    g.work->wait();
    g.work.reset();
  }
  float* reduced = reduced_f32(g);
  trace::end(trace::kReduceSlot0 + (int)(&g - gslots_.data()));
  const size_t n = (size_t)s.shard_numel;
  if (host_states()) {
    trace::Scope copy(trace::kCopies, "d2h grad " + layout_.unit(u).name, "copy");
    finish_host_grad(g);  // the previous unit's copy out of this slot, before host_rs is overwritten
    g.d2h = track(be_.copy_d2h_async(g.host_rs, reduced, n * sizeof(float)));
    g.d2h_reads_slot = true;
    g.host_unit = u;  // added on the host later, while the device runs ahead
  } else {
    be_.accumulate_f32(s.grad, reduced, n);
  }
  if (g.src == s.nosync_acc) {
    release_copy_source(g);  // when G = 1 the copy reads the accumulator itself
    be_.zero(s.nosync_acc, (size_t)s.padded * sizeof(float));
  }
  g.owner = -1;
  g.reducing = false;
  g.src = nullptr;
  trace_counters();
}

// After the slot's collective: the hybrid replica all-reduce (same dtype), then widening from bf16.
float* FsdpEngine::reduced_f32(GradSlot& g) {
  const size_t n = (size_t)units_[g.owner].shard_numel;  // equals padded when G = 1
  const bool bf16 = bf16_reduce();
  float* f32 = group_ > 1 ? g.rs_out : g.src;             // (n) fp32: the result the grad shard receives
  void* out = !bf16 ? static_cast<void*>(f32) : group_ > 1 ? g.recv_bf16 : g.send_bf16;  // (n) collective's result
  if (group_ > 1 && replica_comm_->world() > 1)
    replica_comm_->all_reduce(out, n, bf16 ? DType::BF16 : DType::F32, ReduceOp::avg);
  if (bf16) be_.bf16_to_f32(f32, out, n);
  return f32;
}

void FsdpEngine::finish_host_grad(GradSlot& g) {
  if (g.host_unit < 0) return;
  UnitShard& s = units_[g.host_unit];
  be_.wait_copy_host(g.d2h);
  cpu::accumulate_f32(s.grad, g.host_rs, (size_t)s.shard_numel);
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

void FsdpEngine::zero_grad_shards() {
  for (auto& s : units_) {
    const size_t bytes = (size_t)s.shard_numel * sizeof(float);
    if (host_states())
      std::memset(s.grad, 0, bytes);
    else
      be_.zero(s.grad, bytes);
  }
}

double FsdpEngine::grad_sumsq() {
  double local = 0;
  for (auto& s : units_) {
    local += host_states() ? cpu::sum_squares(s.grad, (size_t)s.shard_numel)
                           : be_.sum_squares(s.grad, (size_t)s.shard_numel);
  }
  return group_ > 1 ? shard_comm_->all_reduce_scalar(local, ReduceOp::sum) : local;
}

}  // namespace gpt
