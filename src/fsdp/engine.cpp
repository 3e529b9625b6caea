// FsdpEngine construction: shard geometry, the placement of model states (device or host), the gather
// and gradient slot pools (allocated once: no allocation happens inside a step), and whole-unit
// transfers used by init, load and export. The per-step mechanics live in engine_step.cpp.
#include <algorithm>
#include <cstring>

#include "src/core/check.h"
#include "src/fsdp/engine.h"

namespace gpt {

FsdpEngine::FsdpEngine(Backend& be, Communicator& world, const Layout& layout, const FsdpOptions& opt)
    : be_(be), world_(world), layout_(layout), opt_(opt) {
  const int N = world.world();
  GPT_CHECK(opt.gather_slots >= 1 && opt.gather_slots <= 64, "--gather-slots must be in [1, 64], got ",
            opt.gather_slots);
  switch (opt.strategy) {
    case ShardStrategy::full:
    case ShardStrategy::grad_op: group_ = N; break;
    case ShardStrategy::none: group_ = 1; break;
    case ShardStrategy::hybrid:
      GPT_CHECK(opt.shard_group >= 1 && N % opt.shard_group == 0, "--shard-group ", opt.shard_group,
                " must be >= 1 and divide the world size ", N);
      group_ = opt.shard_group;
      break;
  }
  // Collective on every rank, in the same order.
  shard_comm_ = world.split(world.rank() / group_, world.rank());
  replica_comm_ = world.split(world.rank() % group_, world.rank());
  const int r = shard_comm_->rank();
  for (int u = 0; u < layout.num_units(); u++) {
    UnitShard s;
    s.numel = layout.unit(u).numel;
    s.padded = (s.numel + group_ - 1) / group_ * group_;
    s.shard_numel = s.padded / group_;
    s.shard_offset = (int64_t)r * s.shard_numel;
    units_.push_back(std::move(s));
  }
  allocate_states();
  allocate_pools();
}

FsdpEngine::~FsdpEngine() {
  try {
    finish_backward();
  } catch (...) {
  }
  for (auto& s : slots_) {
    be_.free(s.data);
    be_.free(s.stage_f32);
    be_.free(s.stage_c);
  }
  for (auto& g : gslots_) {
    be_.free(g.data);
    be_.free(g.rs_out);
    be_.free(g.send_bf16);
    be_.free(g.recv_bf16);
    be_.free_host(g.host_rs);
  }
  be_.free(refresh_stage_);
  for (auto& s : units_) {
    if (host_states()) {
      for (float* p : {s.param, s.grad, s.m, s.v}) be_.free_host(p);
    } else {
      for (float* p : {s.param, s.grad, s.m, s.v}) be_.free(p);
    }
    be_.free(s.param_dev);
    be_.free(s.nosync_acc);
  }
}

bool FsdpEngine::direct_params() const {
  return be_.compute_dtype() == DType::F32 && group_ == 1 && opt_.offload == OffloadMode::none;
}
bool FsdpEngine::direct_grads() const { return world_.world() == 1 && opt_.offload == OffloadMode::none; }
bool FsdpEngine::bf16_reduce() const { return opt_.reduce_dtype == DType::BF16 && world_.world() > 1; }

// fp32 buffer of n elements in the states' domain, zeroed.
float* FsdpEngine::alloc_state(int64_t n, MemCat cat) {
  const size_t bytes = (size_t)n * sizeof(float);
  if (host_states()) {
    auto* p = static_cast<float*>(be_.alloc_host(bytes, cat));
    if (p) std::memset(p, 0, bytes);
    return p;
  }
  auto* p = static_cast<float*>(be_.alloc(bytes, cat));
  if (p) be_.zero(p, bytes);
  return p;
}

void FsdpEngine::allocate_states() {
  for (auto& s : units_) {
    s.param = alloc_state(s.shard_numel, MemCat::param_shard);
    s.grad = alloc_state(s.shard_numel, MemCat::grad_shard);
    s.m = alloc_state(s.shard_numel, MemCat::optim_state);
    s.v = alloc_state(s.shard_numel, MemCat::optim_state);
    if (opt_.offload == OffloadMode::optimizer)
      s.param_dev = be_.alloc((size_t)s.shard_numel * be_.compute_size(), MemCat::param_shard);
    if (opt_.no_sync && !direct_grads()) {
      s.nosync_acc = static_cast<float*>(be_.alloc((size_t)s.padded * sizeof(float), MemCat::gathered_grad));
      be_.zero(s.nosync_acc, (size_t)s.padded * sizeof(float));
    }
  }
}

void FsdpEngine::allocate_pools() {
  const size_t cs = be_.compute_size();
  int64_t max_padded = 0, max_shard = 0;
  for (int u = 1; u < (int)units_.size(); u++) {
    max_padded = std::max(max_padded, units_[u].padded);
    max_shard = std::max(max_shard, units_[u].shard_numel);
  }
  const UnitShard& root = units_[0];
  const bool need_stage_c = be_.compute_dtype() != DType::F32 && opt_.offload != OffloadMode::optimizer;
  if (!direct_params()) {
    const int rotating = opt_.strategy == ShardStrategy::grad_op ? (int)units_.size() - 1 : opt_.gather_slots;
    slots_.resize(1 + rotating);
    for (int i = 0; i <= rotating; i++) {
      const int64_t padded = i == 0 ? root.padded : max_padded, shard = i == 0 ? root.shard_numel : max_shard;
      Slot& s = slots_[i];
      s.data = be_.alloc((size_t)padded * cs, MemCat::gathered_param);
      if (opt_.offload == OffloadMode::params)
        s.stage_f32 = static_cast<float*>(be_.alloc((size_t)shard * sizeof(float), MemCat::host_offload));
      if (need_stage_c) s.stage_c = be_.alloc((size_t)shard * cs, MemCat::workspace);
    }
  }
  if (opt_.offload == OffloadMode::optimizer && be_.compute_dtype() != DType::F32) {
    int64_t m = std::max(max_shard, root.shard_numel);
    refresh_stage_ = static_cast<float*>(be_.alloc((size_t)m * sizeof(float), MemCat::host_offload));
  }
  if (!direct_grads()) {
    gslots_.resize(3);
    for (int i = 0; i < 3; i++) {
      const int64_t padded = i == 0 ? root.padded : max_padded, shard = i == 0 ? root.shard_numel : max_shard;
      GradSlot& g = gslots_[i];
      if (!opt_.no_sync) g.data = static_cast<float*>(be_.alloc((size_t)padded * sizeof(float), MemCat::gathered_grad));
      if (group_ > 1) g.rs_out = static_cast<float*>(be_.alloc((size_t)shard * sizeof(float), MemCat::gathered_grad));
      if (bf16_reduce()) {
        g.send_bf16 = be_.alloc((size_t)padded * 2, MemCat::gathered_grad);
        if (group_ > 1) g.recv_bf16 = be_.alloc((size_t)shard * 2, MemCat::gathered_grad);
      }
      if (host_states())
        g.host_rs = static_cast<float*>(be_.alloc_host((size_t)(group_ > 1 ? shard : padded) * sizeof(float),
                                                       MemCat::host_offload));
    }
  }
}

CommCounters FsdpEngine::traffic_step() const {
  CommCounters a = shard_comm_->ledger().step(), b = replica_comm_->ledger().step();
  for (int k = 0; k < kCollKinds; k++) {
    a.bytes_sent[k] += b.bytes_sent[k];
    a.calls[k] += b.calls[k];
  }
  return a;
}

void FsdpEngine::begin_traffic_step() {
  shard_comm_->ledger().begin_step();
  replica_comm_->ledger().begin_step();
}

int64_t FsdpEngine::model_state_bytes() const {
  int64_t n = 0;
  for (const auto& s : units_) n += 4 * s.shard_numel;
  return n * (int64_t)sizeof(float);
}

void FsdpEngine::set_unit_from_host(int u, const float* full) {
  wait_host_copies();  // no offload copy may still read the host shard rewritten here
  UnitShard& s = units_[u];
  std::vector<float> mine((size_t)s.shard_numel, 0.0f);
  for (int64_t i = 0; i < s.shard_numel; i++) {
    const int64_t g = s.shard_offset + i;
    if (g < s.numel) mine[i] = full[g];
  }
  if (host_states()) {
    std::memcpy(s.param, mine.data(), mine.size() * sizeof(float));
  } else {
    be_.copy_h2d(s.param, mine.data(), mine.size() * sizeof(float));
    be_.synchronize();
  }
}

// Copy-stream copies, each waited for by the compute stream only (the next gather reads param_dev on
// it); the host shards they read are not written again before the next finish_backward waits for them.
void FsdpEngine::sync_device_copies() {
  if (opt_.offload != OffloadMode::optimizer) return;
  for (auto& s : units_) {
    const size_t bytes = (size_t)s.shard_numel * sizeof(float);
    if (be_.compute_dtype() == DType::F32) {
      be_.wait_copy_device(track(be_.copy_h2d_async(s.param_dev, s.param, bytes)));
    } else {
      be_.wait_copy_device(track(be_.copy_h2d_async(refresh_stage_, s.param, bytes)));
      be_.f32_to_compute(s.param_dev, refresh_stage_, (size_t)s.shard_numel);
    }
  }
}

std::vector<float> FsdpEngine::gather_unit_to_host(int u) {
  UnitShard& s = units_[u];
  std::vector<float> full((size_t)s.padded);
  std::vector<float> mine((size_t)s.shard_numel);
  if (host_states()) {
    std::memcpy(mine.data(), s.param, mine.size() * sizeof(float));
  } else {
    be_.copy_d2h(mine.data(), s.param, mine.size() * sizeof(float));
    be_.synchronize();
  }
  if (group_ == 1) {
    full = mine;
  } else {
    auto* in = static_cast<float*>(be_.alloc(mine.size() * sizeof(float), MemCat::workspace));
    auto* out = static_cast<float*>(be_.alloc(full.size() * sizeof(float), MemCat::workspace));
    be_.copy_h2d(in, mine.data(), mine.size() * sizeof(float));
    be_.synchronize();
    shard_comm_->all_gather(out, in, (size_t)s.shard_numel, DType::F32);
    be_.copy_d2h(full.data(), out, full.size() * sizeof(float));
    be_.synchronize();
    be_.free(in);
    be_.free(out);
  }
  full.resize((size_t)s.numel);
  return full;
}

}  // namespace gpt

namespace gpt {

static float* pick_state(UnitShard& s, int which) { return which == 0 ? s.param : which == 1 ? s.m : s.v; }

void FsdpEngine::shard_to_host(int u, int which, std::vector<float>& out) {
  UnitShard& s = units_[u];
  out.resize((size_t)s.shard_numel);
  const size_t bytes = out.size() * sizeof(float);
  if (host_states()) {
    std::memcpy(out.data(), pick_state(s, which), bytes);
  } else {
    be_.copy_d2h(out.data(), pick_state(s, which), bytes);
    be_.synchronize();
  }
}

void FsdpEngine::shard_from_host(int u, int which, const std::vector<float>& in) {
  wait_host_copies();  // as in set_unit_from_host
  UnitShard& s = units_[u];
  GPT_CHECK((int64_t)in.size() == s.shard_numel, "fsdp: shard size mismatch for unit ", layout_.unit(u).name);
  const size_t bytes = in.size() * sizeof(float);
  if (host_states()) {
    std::memcpy(pick_state(s, which), in.data(), bytes);
  } else {
    be_.copy_h2d(pick_state(s, which), in.data(), bytes);
    be_.synchronize();
  }
}

}  // namespace gpt
