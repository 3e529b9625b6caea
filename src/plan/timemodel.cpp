// See timemodel.h. The replay mirrors src/fsdp/engine_step.cpp call for call (acquire, release, grad_buffer,
// grad_ready, complete_reduction, finish_backward, update_params) and src/model/gpt.cpp's order of ops.
#include "src/plan/timemodel.h"

#include <algorithm>
#include <cmath>
#include <deque>
#include <map>

#include "src/core/check.h"
#include "src/fsdp/geometry.h"
#include "src/fsdp/grad_slot_rule.h"
#include "src/model/layout.h"
#include "src/plan/collectives.h"
#include "src/plan/op_costs.h"

namespace gpt {

namespace {

// The rates one rank sees: a hardware profile, scaled when the run's ranks x threads differ from it.
struct RankRates {
  RateCurve gemm, gemm_backward, gemm_tasks, stream, copy;
  std::map<std::string, RateCurve> kernels;
  double host_bandwidth = 0, pcie_bandwidth = 0, op_overhead = 0, peak = 0;
  bool cpu = true;

  double seconds(const OpCost& o) const {
    double s = o.launches * op_overhead;
    if (!o.kernel.empty() && o.elements > 0 && (o.cls == OpClass::stream || (cpu && o.cls == OpClass::host_stream))) {
      const auto k = kernels.find(o.kernel);
      if (k != kernels.end()) return s + o.elements / k->second.at(o.elements);
    }
    switch (o.cls) {
      case OpClass::gemm: return s + (o.flops > 0 ? o.flops / gemm.at(o.mnk) : 0);
      case OpClass::gemm_backward: return s + (o.flops > 0 ? o.flops / gemm_backward.at(o.mnk) : 0);
      case OpClass::gemm_tasks: return s + (o.flops > 0 ? o.flops / gemm_tasks.at(o.mnk) : 0);
      case OpClass::stream: return s + (o.bytes > 0 ? o.bytes / stream.at(o.bytes) : 0);
      case OpClass::copy: return s + (o.bytes > 0 ? o.bytes / copy.at(o.bytes) : 0);
      case OpClass::host_stream:
        return s + (o.bytes > 0 ? o.bytes / (cpu ? stream.at(o.bytes) : host_bandwidth) : 0);
      case OpClass::pcie: return s + (o.bytes > 0 ? o.bytes / (cpu ? copy.at(o.bytes) : pcie_bandwidth) : 0);
    }
    return s;
  }
  double seconds(const std::vector<OpCost>& ops) const {
    double s = 0;
    for (const OpCost& o : ops) s += seconds(o);
    return s;
  }
  double seconds(OpClass cls, double bytes) const {
    OpCost o;
    o.cls = cls;
    o.bytes = bytes;
    return seconds(o);
  }
};

// Picks the profile for R ranks x `threads` threads: the exact one, else the nearest (same threads first),
// scaled by the cores a rank gets: min(1, cores / (ranks * threads)) * threads.
RankRates rates_for(const HardwareSpec& hw, int R, int threads, std::string* describe, std::vector<std::string>* notes) {
  const ComputeProfile* best = nullptr;
  double best_d = 1e300;
  for (const ComputeProfile& p : hw.profiles) {
    const double d = std::fabs(std::log((double)p.ranks / R)) + 4 * std::fabs(std::log((double)p.threads / threads));
    if (d < best_d) best = &p, best_d = d;
  }
  double scale = 1;
  if (hw.kind == "cpu") {
    auto cores_of = [&](int ranks, int thr) { return thr * std::min(1.0, (double)hw.cores / ((double)ranks * thr)); };
    scale = cores_of(R, threads) / cores_of(best->ranks, best->threads);
  }
  RankRates r;
  r.cpu = hw.kind == "cpu";
  r.gemm = best->gemm.scaled(scale);
  r.gemm_backward = best->gemm_backward.scaled(scale);
  for (const auto& [fam, c] : best->kernels) r.kernels[fam] = c.scaled(scale);
  r.gemm_tasks = best->gemm_tasks.scaled(scale);
  r.stream = best->stream.scaled(scale);
  r.copy = best->copy.scaled(std::min(1.0, scale));  // copies are single-threaded: scaled down, never up
  r.host_bandwidth = hw.host_bandwidth;
  r.pcie_bandwidth = hw.pcie_bandwidth;
  r.op_overhead = hw.op_overhead;
  r.peak = hw.kind == "cpu" ? r.gemm.max_y() : hw.peak_flops;
  *describe = hw.kind == "cpu" ? str("profile ", best->ranks, " ranks x ", best->threads, " threads")
                               : std::string("device profile");
  if (hw.kind == "cpu" && (best->ranks != R || best->threads != threads)) {
    *describe += str(" scaled x", scale, " for ", R, " ranks x ", threads, " threads on ", hw.cores, " cores");
    notes->push_back(str("no profile calibrated for ", R, " ranks x ", threads, " threads: ", *describe,
                         " (calibrate with mpirun -n ", R, " gpt bench --calibrate)"));
  }
  return r;
}

std::vector<int64_t> unit_numels(const Layout& l) {
  std::vector<int64_t> n;
  for (int u = 0; u < l.num_units(); u++) n.push_back(l.unit(u).numel);
  return n;
}

// One rank's step on the compute timeline `t`, with the communicators' channels beside it.
class Replay {
 public:
  Replay(const TimeModelInput& in, const HardwareSpec& hw, const Layout& layout, const EngineGeometry& geo,
         const RankRates& rates, const NetworkModel& net, int R)
      : in_(in), layout_(layout), geo_(geo), rates_(rates), net_(net), R_(R) {
    const int U = layout.num_units();
    pstate_.assign(U, kSharded);
    pcoll_.assign(U, -1);
    free_rot_ = geo.rotating_slots;
    gs_.assign(geo.grad_slots, GSlot{});
    gpu_ = hw.kind == "gpu";
    overlap_ = hw.overlap;
    replica_world_ = geo.world / geo.group;
    // The shard group is contiguous ranks: min(G, R) of them on a node. A replica group takes one rank
    // per shard group: one per node when G >= R, else R/G per node.
    shard_per_node_ = std::min(geo.group, R);
    replica_per_node_ = std::max(1, R / std::max(1, geo.group));
    reduce_dt_ = geo.bf16_reduce ? DType::BF16 : DType::F32;
  }

  TimePlan run(const std::vector<UnitTime>& units, double enc_f, double enc_b, double lm_f, double lm_b) {
    units_ = &units;
    enc_f_ = enc_f, enc_b_ = enc_b, lm_f_ = lm_f, lm_b_ = lm_b;
    begin_step();
    for (int m = 0; m < in_.grad_accum; m++) {
      last_ = m == in_.grad_accum - 1;
      forward();
      backward();
    }
    finish_backward();
    end_step();
    TimePlan p;
    p.step_s = t_;
    p.phases = ph_;
    p.comm_s = comm_s_;
    p.exposed_comm_s = ph_.exposed_comm;
    p.bytes = bytes_;
    p.calls = calls_;
    p.gathers_ahead = gathers_ahead_;
    return p;
  }

 private:
  enum PState { kSharded, kGathering, kGathered };
  struct Coll {
    int channel = 0;
    double dur = 0, end = 0;
    bool done = false;
  };
  struct GSlot {
    int owner = -1;
    bool reducing = false;
    int coll = -1;
    int host_unit = -1;
    double d2h_end = 0;
    bool d2h_reads_slot = false;
  };

  const std::vector<int>& order(Pass p) const { return layout_.pass_order(p); }
  int pos(int u, Pass p) const {
    const std::vector<int>& o = order(p);
    return (int)(std::find(o.begin(), o.end(), u) - o.begin());
  }
  int64_t shard(int u) const { return geo_.units[u].shard_numel; }
  int64_t padded(int u) const { return geo_.units[u].padded; }
  double cs() const { return (double)dtype_size(geo_.compute); }
  bool host_states() const { return geo_.host_states; }
  // fills and conversions: a single-threaded loop on the cpu backend, a kernel on cuda
  OpClass fill_class() const { return gpu_ ? OpClass::stream : OpClass::copy; }
  OpClass states_class() const { return host_states() ? OpClass::host_stream : OpClass::stream; }

  // ---- timelines ----
  void spend(double s, double& bucket) {
    t_ += s;
    bucket += s;
  }
  int start_coll(int channel, CollKind kind, size_t count, DType dt, int group, int per_node) {
    const int64_t b = collective_bytes(kind, count, dt, group);
    bytes_[(int)kind] += b;
    calls_[(int)kind] += 1;
    Coll c;
    c.channel = channel;
    c.dur = net_.seconds(kind, b, group, per_node);
    comm_s_ += c.dur;
    if (overlap_) {
      const double start = std::max(t_, chan_free_[channel]);
      c.end = start + c.dur;
      chan_free_[channel] = c.end;
    } else {
      backlog_.push_back((int)colls_.size());
    }
    colls_.push_back(c);
    return (int)colls_.size() - 1;
  }
  void wait_coll(int id) {
    if (id < 0) return;
    Coll& c = colls_[id];
    if (overlap_) {
      if (c.end > t_) spend(c.end - t_, ph_.exposed_comm);
      c.done = true;
      return;
    }
    while (!c.done) {  // the FIFO advances only while this rank waits
      Coll& f = colls_[backlog_.front()];
      backlog_.pop_front();
      spend(f.dur, ph_.exposed_comm);
      f.done = true;
    }
  }
  // A host <-> device copy: on the copy stream (cuda), or a memcpy now (cpu). Returns when it ends.
  double copy(double bytes) {
    const double s = rates_.seconds(OpClass::pcie, bytes);
    if (!gpu_) {
      spend(s, ph_.copies);
      return t_;
    }
    const double start = std::max(t_, copy_free_);
    copy_free_ = start + s;
    return copy_free_;
  }
  void wait_until(double end, double& bucket) {
    if (end > t_) spend(end - t_, bucket);
  }
  // Work the cuda backend's host thread does on offloaded states, beside the device.
  void host_work(double after, double s) { host_free_ = std::max(host_free_, after) + s; }

  // ---- gathers (engine_step.cpp: start_gather, wait_gather, free_unit, prefetch_after) ----
  void start_gather(int u) {
    if (pstate_[u] != kSharded) return;
    if (u != layout_.embed_unit()) {
      GPT_CHECK(free_rot_ > 0, "time model: no free gather slot for ", layout_.unit(u).name);
      free_rot_--;
    }
    pstate_[u] = kGathering;
    const double n = (double)shard(u);
    const OffloadMode off = geo_.opt.offload;
    if (off == OffloadMode::params) wait_until(copy(4 * n), ph_.copies);  // compute waits for the h2d copy
    if (geo_.compute != DType::F32 && off != OffloadMode::optimizer)
      spend(rates_.seconds(OpClass::stream, n * (4 + cs())), ph_.engine);  // f32_to_compute into the slot's input
    if (geo_.group == 1) {
      spend(rates_.seconds(OpClass::copy, padded(u) * cs()), ph_.engine);  // copy_d2d into the slot
    } else {
      pcoll_[u] = start_coll(0, CollKind::all_gather, (size_t)shard(u), geo_.compute, geo_.group, shard_per_node_);
    }
  }
  void wait_gather(int u) {
    wait_coll(pcoll_[u]);
    pcoll_[u] = -1;
    pstate_[u] = kGathered;
  }
  void free_unit(int u) {
    if (pstate_[u] == kSharded) return;
    wait_coll(pcoll_[u]);
    pcoll_[u] = -1;
    if (u != layout_.embed_unit()) free_rot_++;
    pstate_[u] = kSharded;
  }
  // The window: positions p+1 .. p+K-1 after the acquired unit, root and already gathered units skipped,
  // stopping at the first unit without a free rotating slot; filled at acquire only.
  void prefetch_after(int u, Pass p) {
    if (geo_.group == 1) return;
    const std::vector<int>& o = order(p);
    const int i = pos(u, p), last = std::min((int)o.size() - 1, i + geo_.opt.gather_slots - 1);
    for (int j = i + 1; j <= last; j++) {
      const int next = o[j];
      if (next == layout_.embed_unit() || pstate_[next] != kSharded) continue;
      if (free_rot_ == 0) return;
      start_gather(next);
    }
  }
  void acquire(int u, Pass p) {
    if (geo_.resident_params()) {  // the model reads a persistent buffer: nothing is gathered
      gathers_ahead_.push_back(0);
      return;
    }
    if (pstate_[u] != kGathered) {
      start_gather(u);
      wait_gather(u);
    }
    prefetch_after(u, p);
    gathers_ahead_.push_back((int)std::count(pstate_.begin(), pstate_.end(), (int)kGathering));
  }
  void release(int u, Pass p) {
    if (geo_.resident_params()) return;  // the model reads a persistent buffer: nothing is gathered
    if (p == Pass::forward && (u == layout_.embed_unit() || geo_.opt.strategy == ShardStrategy::grad_op)) return;
    free_unit(u);
  }

  // ---- gradients (take_grad_slot, grad_buffer, grad_ready, complete_reduction) ----
  void release_copy_source(GSlot& g) {
    if (!g.d2h_reads_slot) return;
    wait_until(g.d2h_end, ph_.copies);
    g.d2h_reads_slot = false;
  }
  int take_grad_slot(int u) {
    const int open = open_grad_slot(gs_, u);
    if (open >= 0) return open;
    const bool root = u == layout_.embed_unit();
    for (;;) {
      const int f = free_grad_slot(gs_, root);
      if (f >= 0) {
        release_copy_source(gs_[f]);
        return f;
      }
      GPT_CHECK(!pending_.empty(), "time model: no free gradient slot for ", layout_.unit(u).name);
      const int oldest = pending_.front();
      pending_.pop_front();
      complete_reduction(oldest);
    }
  }
  void grad_buffer(int u) {
    if (geo_.direct_grads || geo_.opt.no_sync) return;
    GSlot& g = gs_[take_grad_slot(u)];
    g.owner = u;
    spend(rates_.seconds(fill_class(), 4.0 * padded(u)), ph_.engine);  // zero the full-unit gradient
  }
  void grad_ready(int u) {
    if (geo_.direct_grads || (geo_.opt.no_sync && !last_)) return;
    const int i = take_grad_slot(u);
    GSlot& g = gs_[i];
    g.owner = u;
    g.reducing = true;
    if (geo_.bf16_reduce) spend(rates_.seconds(fill_class(), 6.0 * padded(u)), ph_.engine);  // f32 -> bf16
    if (geo_.group > 1)
      g.coll = start_coll(0, CollKind::reduce_scatter, (size_t)shard(u), reduce_dt_, geo_.group, shard_per_node_);
    else
      g.coll = start_coll(1, CollKind::all_reduce, (size_t)padded(u), reduce_dt_, replica_world_, std::min(R_, replica_world_));
    pending_.push_back(i);
  }
  void finish_host_grad(GSlot& g) {
    if (g.host_unit < 0) return;
    const double s = rates_.seconds(OpClass::host_stream, 12.0 * shard(g.host_unit));  // grad += host copy
    if (gpu_)
      host_work(g.d2h_end, s);
    else
      spend(s, ph_.engine);
    g.host_unit = -1;
  }
  void complete_reduction(int i) {
    GSlot& g = gs_[i];
    const int u = g.owner;
    wait_coll(g.coll);
    g.coll = -1;
    const double n = (double)shard(u);
    if (geo_.group > 1 && replica_world_ > 1) {  // hybrid: the replica all-reduce, synchronous
      const int id = start_coll(1, CollKind::all_reduce, (size_t)shard(u), reduce_dt_, replica_world_, replica_per_node_);
      wait_coll(id);
    }
    if (geo_.bf16_reduce) spend(rates_.seconds(fill_class(), 6.0 * n), ph_.engine);  // bf16 -> f32
    if (host_states()) {
      finish_host_grad(g);
      g.d2h_end = copy(4.0 * (geo_.group > 1 ? n : (double)padded(u)));
      g.d2h_reads_slot = true;
      g.host_unit = u;
    } else {
      spend(rates_.seconds(OpClass::stream, 12.0 * n), ph_.engine);  // grad shard += reduced
    }
    if (geo_.opt.no_sync) spend(rates_.seconds(fill_class(), 4.0 * padded(u)), ph_.engine);  // zero the accumulator
    g.owner = -1;
    g.reducing = false;
  }

  // ---- the step (gpt.cpp forward/backward, trainer.cpp step) ----
  void begin_step() {
    // free_all_units: nothing gathered; the grad shards are zeroed where the states live
    for (int u = 0; u < layout_.num_units(); u++)
      spend(rates_.seconds(host_states() && gpu_ ? OpClass::host_stream : fill_class(), 4.0 * shard(u)), ph_.optimizer);
  }
  void forward() {
    const int eu = layout_.embed_unit(), hu = layout_.head_unit();
    acquire(eu, Pass::forward);
    spend(enc_f_, ph_.forward);
    for (int l = 0; l < layout_.config().num_layers; l++) {
      const int u = layout_.block_unit(l);
      acquire(u, Pass::forward);
      spend((*units_)[u].forward, ph_.forward);
      release(u, Pass::forward);
    }
    acquire(hu, Pass::forward);
    spend((*units_)[hu].forward, ph_.forward);
    release(hu, Pass::forward);
    spend(lm_f_, ph_.forward);
    release(eu, Pass::forward);
  }
  void backward() {
    const int eu = layout_.embed_unit(), hu = layout_.head_unit();
    acquire(eu, Pass::backward);
    grad_buffer(eu);
    spend(lm_b_, ph_.backward);
    acquire(hu, Pass::backward);
    grad_buffer(hu);
    spend((*units_)[hu].backward, ph_.backward);
    release(hu, Pass::backward);
    grad_ready(hu);
    for (int l = layout_.config().num_layers - 1; l >= 0; l--) {
      const int u = layout_.block_unit(l);
      acquire(u, Pass::backward);
      spend((*units_)[u].recompute, ph_.recompute);
      grad_buffer(u);
      spend((*units_)[u].backward, ph_.backward);
      release(u, Pass::backward);
      grad_ready(u);
    }
    spend(enc_b_, ph_.backward);
    grad_ready(eu);
    release(eu, Pass::backward);
  }
  void finish_backward() {
    while (!pending_.empty()) {
      const int i = pending_.front();
      pending_.pop_front();
      complete_reduction(i);
    }
    for (GSlot& g : gs_) finish_host_grad(g);
    if (gpu_) {  // the host waits for every copy and its own adds
      host_free_ = std::max(host_free_, copy_free_);
      wait_until(host_free_, ph_.host_wait);
    }
  }
  void end_step() {
    if (geo_.world > 1) spend(net_.scalar_seconds(geo_.world, std::min(R_, geo_.world)), ph_.exposed_comm);  // loss
    double sumsq = 0;
    for (int u = 0; u < layout_.num_units(); u++) sumsq += rates_.seconds(states_class(), 4.0 * shard(u));
    spend(sumsq, ph_.optimizer);
    if (geo_.group > 1) spend(net_.scalar_seconds(geo_.group, shard_per_node_), ph_.exposed_comm);  // grad norm
    // AdamW, one call per tensor segment of this rank's shard (engine.update_params)
    for (int u = 0; u < layout_.num_units(); u++) {
      const UnitGeometry& g = geo_.units[u];
      const int64_t lo = g.shard_offset, hi = g.shard_offset + g.shard_numel;
      const std::vector<TensorSpec>& tensors = layout_.unit(u).tensors;
      for (const TensorSpec& t : tensors) {
        const int64_t t_hi = &t == &tensors.back() ? hi : t.offset + t.numel;
        const int64_t a = std::max(lo, t.offset), b = std::min(hi, t_hi);
        if (a < b) {
          OpCost o;
          o.cls = states_class();
          // reads param, grad, m, v; writes param, m, v (and the compute copy's element when there is one)
          o.bytes = (28.0 + (geo_.compute_copy ? cs() : 0)) * (double)(b - a);
          o.kernel = "adamw";
          o.elements = (double)(b - a);
          spend(rates_.seconds(o), ph_.optimizer);
        }
      }
      if (geo_.opt.offload == OffloadMode::optimizer) {  // refresh_device_copy: h2d (+ conversion)
        wait_until(copy(4.0 * shard(u)), ph_.copies);
        if (geo_.compute != DType::F32) spend(rates_.seconds(OpClass::stream, shard(u) * (4 + cs())), ph_.optimizer);
      }
    }
    if (gpu_) wait_until(std::max(copy_free_, host_free_), ph_.host_wait);  // synchronize
  }

  const TimeModelInput& in_;
  const Layout& layout_;
  const EngineGeometry& geo_;
  const RankRates& rates_;
  const NetworkModel& net_;
  int R_;
  bool gpu_ = false, overlap_ = true, last_ = true;
  int replica_world_ = 1, shard_per_node_ = 1, replica_per_node_ = 1;
  DType reduce_dt_ = DType::F32;
  const std::vector<UnitTime>* units_ = nullptr;
  double enc_f_ = 0, enc_b_ = 0, lm_f_ = 0, lm_b_ = 0;

  double t_ = 0, comm_s_ = 0, copy_free_ = 0, host_free_ = 0;
  double chan_free_[2] = {0, 0};
  StepPhases ph_;
  std::array<int64_t, kCollKinds> bytes_{}, calls_{};
  std::vector<Coll> colls_;
  std::deque<int> backlog_;
  std::vector<int> pstate_, pcoll_, gathers_ahead_;
  int free_rot_ = 0;
  std::vector<GSlot> gs_;
  std::deque<int> pending_;
};

// Each unit's gather and reduction on its own, for the report.
void unit_collectives(std::vector<UnitTime>& units, const EngineGeometry& geo, const NetworkModel& net, int R,
                      DType compute) {
  const int replica_world = geo.world / geo.group;
  const DType rdt = geo.bf16_reduce ? DType::BF16 : DType::F32;
  for (int u = 0; u < (int)units.size(); u++) {
    const UnitGeometry& g = geo.units[u];
    UnitTime& ut = units[u];
    if (geo.group > 1) {
      ut.gather = net.seconds(CollKind::all_gather, collective_bytes(CollKind::all_gather, (size_t)g.shard_numel,
                                                                     compute, geo.group),
                              geo.group, std::min(geo.group, R));
      ut.reduce = net.seconds(CollKind::reduce_scatter,
                              collective_bytes(CollKind::reduce_scatter, (size_t)g.shard_numel, rdt, geo.group), geo.group,
                              std::min(geo.group, R));
      if (replica_world > 1)
        ut.reduce += net.seconds(CollKind::all_reduce,
                                 collective_bytes(CollKind::all_reduce, (size_t)g.shard_numel, rdt, replica_world),
                                 replica_world, std::max(1, R / geo.group));
    } else if (replica_world > 1) {
      ut.reduce = net.seconds(CollKind::all_reduce, collective_bytes(CollKind::all_reduce, (size_t)g.padded, rdt, replica_world),
                              replica_world, std::min(R, replica_world));
    }
  }
}

}  // namespace

TimePlan plan_time(const TimeModelInput& in, const HardwareSpec& hw) {
  validate_plan_input(in.run);
  GPT_CHECK(in.grad_accum >= 1, "time model: gradient accumulation must be >= 1, got ", in.grad_accum);
  const bool cpu_run = in.run.compute == DType::F32;
  GPT_CHECK(hw.dtype == in.run.compute, "--hardware ", hw.file, ": its rates are for ",
            hw.dtype == DType::F32 ? "fp32 (the cpu backend)" : "bf16 (the cuda backend)", ", the run computes in ",
            cpu_run ? "fp32 (--device cpu)" : "bf16 (--device cuda)", ": use a matching hardware file");
  const GPTConfig& cfg = in.run.cfg;
  const Layout layout(cfg);
  const EngineGeometry geo(unit_numels(layout), in.run.world, 0, in.run.fsdp, in.run.compute);
  const int R = in.ranks_per_node > 0 ? in.ranks_per_node : std::min(in.run.world, hw.devices_per_node);
  GPT_CHECK(R >= 1 && R <= in.run.world, "time model: ranks per node ", R, " must be in [1, --world ", in.run.world, "]");
  const int threads = in.threads_per_rank > 0 ? in.threads_per_rank : std::max(1, hw.cores / R);

  TimePlan plan;
  const RankRates rates = rates_for(hw, R, threads, &plan.profile, &plan.notes);
  const NetworkModel net(hw, R);
  plan.network = net.describe();

  // Compute per unit (one micro-step).
  const OpShape s = OpShape::of(cfg, in.run.B, in.run.T, cpu_run, in.run.attention != AttentionPath::simple);
  const std::vector<OpCost> blk_f = block_forward_ops(s), blk_b = block_backward_ops(s);
  const double blk_f_s = rates.seconds(blk_f), blk_b_s = rates.seconds(blk_b);
  std::vector<UnitTime> units(layout.num_units());
  double hw_flops = 0;
  for (int u = 0; u < layout.num_units(); u++) units[u].name = layout.unit(u).name;
  for (int l = 0; l < cfg.num_layers; l++) {
    UnitTime& ut = units[layout.block_unit(l)];
    ut.forward = blk_f_s;
    ut.backward = blk_b_s;
    hw_flops += products_flops(blk_f) + products_flops(blk_b);
    const KeptFields kept = KeptFields::for_layer(in.run.recompute, l);
    if (!kept.all()) {
      const std::vector<OpCost> re = block_forward_ops(s, &kept);
      ut.recompute = rates.seconds(re);
      hw_flops += products_flops(re);
    }
  }
  const std::vector<OpCost> ef = embed_forward_ops(s), eb = embed_backward_ops(s), lf = lm_head_forward_ops(s),
                            lb = lm_head_backward_ops(s);
  UnitTime& head = units[layout.head_unit()];
  head.forward = rates.seconds(head_forward_ops(s));
  head.backward = rates.seconds(head_backward_ops(s));
  UnitTime& embed = units[layout.embed_unit()];
  embed.forward = rates.seconds(ef) + rates.seconds(lf);
  embed.backward = rates.seconds(eb) + rates.seconds(lb);
  hw_flops += products_flops(lf) + products_flops(lb);

  unit_collectives(units, geo, net, R, in.run.compute);

  Replay replay(in, hw, layout, geo, rates, net, R);
  TimePlan r = replay.run(units, rates.seconds(ef), rates.seconds(eb), rates.seconds(lf), rates.seconds(lb));
  plan.step_s = r.step_s;
  plan.phases = r.phases;
  plan.comm_s = r.comm_s;
  plan.exposed_comm_s = r.exposed_comm_s;
  plan.bytes = r.bytes;
  plan.calls = r.calls;
  plan.gathers_ahead = r.gathers_ahead;
  plan.units = units;
  plan.compute_s = plan.phases.forward + plan.phases.recompute + plan.phases.backward;
  const double tokens = (double)in.run.B * in.run.T * in.run.world * in.grad_accum;
  plan.tokens_per_s = tokens / plan.step_s;
  const double n = (double)(cfg.num_params() - (int64_t)cfg.max_seq_len * cfg.channels);
  plan.model_flops_per_token = 6.0 * n + 12.0 * cfg.num_layers * cfg.channels * in.run.T;
  plan.peak_flops = rates.peak;
  plan.mfu = plan.tokens_per_s * plan.model_flops_per_token / (plan.peak_flops * in.run.world);
  plan.hardware_flops = hw_flops * in.grad_accum;
  if (!hw.overlap && in.run.world > 1)
    plan.notes.push_back("collectives progress only inside wait() (network.overlap false): every byte is exposed");
  return plan;
}

}  // namespace gpt
