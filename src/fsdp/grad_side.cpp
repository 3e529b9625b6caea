// See grad_side.h: gradient slots, the reductions (reduce-scatter or all-reduce, fp32 or bf16, hybrid's
// replica all-reduce) and their completion into the grad shards.
#include "src/fsdp/grad_side.h"

#include "src/core/check.h"
#include "src/fsdp/grad_slot_rule.h"
#include "src/util/trace.h"
#include "src/util/watchdog.h"

namespace gpt {

GradSide::GradSide(Backend& be, Communicator& shard_comm, Communicator& replica_comm, const Layout& layout,
                   const EngineGeometry& geo, StateStore& store, const ParamSide& params,
                   std::function<void()> changed)
    : be_(be),
      shard_comm_(shard_comm),
      replica_comm_(replica_comm),
      layout_(layout),
      geo_(geo),
      store_(store),
      params_(params),
      changed_(std::move(changed)) {
  const EngineBuffers& bufs = store_.buffers();
  units_.resize(geo_.units.size());
  slots_.resize(geo_.grad_slots);
  for (int u = 0; u < (int)units_.size(); u++)
    unit_buffers(geo_, u, [&](const BufferSpec& b, auto member) { bufs.bind(b, units_[u].*member); });
  for (int i = 0; i < (int)slots_.size(); i++)
    slot_buffers(geo_, i, [&](const BufferSpec& b, auto member) { bufs.bind(b, slots_[i].*member); });
}

// The slot unit u is filling, or a free one (completing the oldest reductions until one frees up).
int GradSide::take_grad_slot(int u) {
  const int open = open_grad_slot(slots_, u);
  if (open >= 0) return open;
  const bool root = layout_.is_root(u);
  for (;;) {
    const int free_slot = free_grad_slot(slots_, root);
    if (free_slot >= 0) {
      store_.release_copy_source(free_slot);
      return free_slot;
    }
    GPT_CHECK(!pending_.empty(), "fsdp: no free gradient slot for unit ", name(u));
    int oldest = pending_.front();
    pending_.pop_front();
    complete_reduction(slots_[oldest]);
  }
}

float* GradSide::grad_buffer(int u) {
  UnitGrad& s = units_[u];
  GPT_CHECK(params_.held_in(u, Pass::backward), "fsdp: grad_buffer(", name(u),
            ") outside its backward (between acquire(", name(u), ", backward) and grad_ready)");
  const bool fresh = s.state == State::idle;
  s.state = State::accumulating;
  if (geo_.direct_grads) return store_.grad(u);
  if (geo_.opt.no_sync) return s.nosync_acc;
  Slot& g = slots_[take_grad_slot(u)];
  if (fresh) {
    g.owner = u;
    g.src = g.data;
    be_.zero(g.data, (size_t)geo_.units[u].padded * sizeof(float));
  }
  return g.data;
}

void GradSide::grad_ready(int u) {
  UnitGrad& s = units_[u];
  GPT_CHECK(s.state == State::accumulating, "fsdp: grad_ready(", name(u),
            ") without a grad_buffer since its last grad_ready");
  s.state = State::idle;
  if (geo_.direct_grads || (geo_.opt.no_sync && !last_micro_)) return;  // nothing to reduce (yet)
  const int i = take_grad_slot(u);
  Slot& g = slots_[i];
  g.owner = u;
  g.reducing = true;
  if (geo_.opt.no_sync) g.src = s.nosync_acc;
  if (trace::slot_tracks_on())
    trace::begin(trace::kReduceSlot0 + i, (geo_.group > 1 ? "reduce-scatter " : "all-reduce ") + name(u), "comm");
  start_reduction(g, u);
  pending_.push_back(i);
  changed_();
}

// The slot's collective on g.src (summed), and on a stream-ordered communicator hybrid's replica all-reduce
// right behind it.
void GradSide::start_reduction(Slot& g, int u) {
  const UnitGeometry& ug = geo_.units[u];
  // The collective below: a reduce-scatter over the shard group, or an all-reduce over the replicas (G = 1).
  (geo_.group > 1 ? shard_comm_ : replica_comm_).set_label(name(u));
  if (geo_.bf16_reduce) {
    be_.f32_to_bf16(g.send_bf16, g.src, (size_t)ug.padded);  // (padded) fp32 -> bf16, nearest-even
    if (geo_.group > 1)
      g.work = shard_comm_.reduce_scatter_async(g.recv_bf16, g.send_bf16, (size_t)ug.shard_numel, DType::BF16,
                                                ReduceOp::sum);
    else
      g.work = replica_comm_.all_reduce_async(g.send_bf16, (size_t)ug.padded, DType::BF16, ReduceOp::sum);
  } else if (geo_.group > 1) {
    g.work = shard_comm_.reduce_scatter_async(g.rs_out, g.src, (size_t)ug.shard_numel, DType::F32, ReduceOp::sum);
  } else {
    g.work = replica_comm_.all_reduce_async(g.src, (size_t)ug.padded, DType::F32, ReduceOp::sum);
  }
  if (geo_.group > 1 && replica_comm_.world() > 1 && shard_comm_.stream_ordered()) {
    replica_comm_.set_label(name(u));
    void* out = geo_.bf16_reduce ? g.recv_bf16 : static_cast<void*>(g.rs_out);  // (shard) the reduce-scatter's result
    g.replica_work = replica_comm_.all_reduce_async(out, (size_t)ug.shard_numel,
                                                    geo_.bf16_reduce ? DType::BF16 : DType::F32, ReduceOp::sum);
  }
}

void GradSide::complete_reduction(Slot& g) {
  const int u = g.owner;
  UnitGrad& s = units_[u];
  watchdog::beat("gradient reduction");
  if (g.work) {
    g.work->wait();
    g.work.reset();
  }
  float* reduced = reduced_f32(g);
  if (trace::slot_tracks_on()) trace::end(trace::kReduceSlot0 + index(g));
  store_.add_reduced(index(g), u, reduced);
  if (g.src == s.nosync_acc) {
    store_.release_copy_source(index(g));  // when G = 1 the copy reads the accumulator itself
    be_.zero(s.nosync_acc, (size_t)geo_.units[u].padded * sizeof(float));
  }
  g.owner = -1;
  g.reducing = false;
  g.src = nullptr;
  changed_();
}

// After the slot's collective: the hybrid replica all-reduce (same dtype), then widening from bf16.
float* GradSide::reduced_f32(Slot& g) {
  const size_t n = (size_t)geo_.units[g.owner].shard_numel;  // equals padded when G = 1
  const bool bf16 = geo_.bf16_reduce, sharded = geo_.group > 1;
  float* f32 = sharded ? g.rs_out : g.src;             // (n) fp32: the result the grad shard receives
  void* out = !bf16 ? static_cast<void*>(f32) : sharded ? g.recv_bf16 : g.send_bf16;  // (n) collective's result
  if (g.replica_work) {  // issued behind the reduce-scatter (grad_ready)
    g.replica_work->wait();
    g.replica_work.reset();
  } else if (sharded && replica_comm_.world() > 1) {
    replica_comm_.set_label(name(g.owner));
    replica_comm_.all_reduce(out, n, bf16 ? DType::BF16 : DType::F32, ReduceOp::sum);
  }
  if (bf16) be_.bf16_to_f32(f32, out, n);
  return f32;
}

void GradSide::finish() {
  while (!pending_.empty()) {
    int i = pending_.front();
    pending_.pop_front();
    complete_reduction(slots_[i]);
  }
  store_.finish_host_grads();  // the host grad shards are complete from here on
}

void GradSide::check_closed(int u, const char* what) const {
  GPT_CHECK(units_[u].state == State::idle, "fsdp: ", what, " while unit ", name(u),
            " has a gradient without its grad_ready");
}

void GradSide::check_none_in_flight(const char* what) const {
  GPT_CHECK(pending_.empty(), "fsdp: ", what, " while gradient reductions are in flight (finish_backward first)");
}

double GradSide::bytes_in_use() const {
  double bytes = 0;
  for (const Slot& g : slots_)
    if (g.owner >= 0) bytes += (double)geo_.units[g.owner].padded * sizeof(float);
  return bytes;
}

}  // namespace gpt
