// FsdpEngine construction: the shard groups, the buffers the geometry lists (states, gather slots,
// gradient slots; allocated once, so no allocation happens inside a step), and whole-unit transfers used
// by init, load, checkpoints and export. The per-step mechanics live in engine_step.cpp.
#include <type_traits>

#include "src/core/check.h"
#include "src/fsdp/engine.h"

namespace gpt {

namespace {
std::vector<int64_t> unit_sizes(const Layout& layout) {
  std::vector<int64_t> n;
  for (int u = 0; u < layout.num_units(); u++) n.push_back(layout.unit(u).numel);
  return n;
}

// The shard group (size G) this rank belongs to; a collective on every rank, in the same order.
std::unique_ptr<Communicator> split_shard_group(Communicator& world, const FsdpOptions& opt) {
  EngineGeometry::options_check(opt, world.world(), "the world size");
  const int G = EngineGeometry::shard_group_size(opt, world.world());
  return world.split_contiguous(G);
}
}  // namespace

FsdpEngine::FsdpEngine(Backend& be, Communicator& world, const Layout& layout, const FsdpOptions& opt)
    : be_(be),
      host_(be.host_side()),
      world_(world),
      layout_(layout),
      shard_comm_(split_shard_group(world, opt)),
      replica_comm_(world.split_strided(shard_comm_->world())),
      geo_(unit_sizes(layout), world.world(), shard_comm_->rank(), opt, be.compute_dtype()) {
  states_ = geo_.host_states ? host_.get() : &be_;
  units_.resize(geo_.units.size());
  slots_.resize(geo_.gather_slots());
  gslots_.resize(geo_.grad_slots);
  for (Pass p : {Pass::forward, Pass::backward}) {
    std::vector<int> pos(units_.size(), -1);
    const std::vector<int>& order = layout_.pass_order(p);
    for (int i = 0; i < (int)order.size(); i++) pos[order[i]] = i;
    pass_pos_.push_back(pos);
  }
  allocate();
}

FsdpEngine::~FsdpEngine() {
  try {
    finish_backward();
  } catch (...) {
  }
  for (const BufferSpec& b : geo_.buffers()) with_buffer(b, [&](auto*& member) { owner(b).free(member); });
}

// Calls f with the member that holds a buffer the geometry lists (a float*& or void*&).
template <typename F>
void FsdpEngine::with_buffer(const BufferSpec& b, F&& f) {
  switch (b.what) {
    case EngineBuffer::param: return f(units_[b.index].param);
    case EngineBuffer::grad: return f(units_[b.index].grad);
    case EngineBuffer::adam_m: return f(units_[b.index].m);
    case EngineBuffer::adam_v: return f(units_[b.index].v);
    case EngineBuffer::param_dev:
    case EngineBuffer::compute_copy: return f(units_[b.index].param_dev);  // the two rules never meet
    case EngineBuffer::nosync_acc: return f(units_[b.index].nosync_acc);
    case EngineBuffer::slot_data: return f(slots_[b.index].data);
    case EngineBuffer::slot_stage_f32: return f(slots_[b.index].stage_f32);
    case EngineBuffer::slot_stage_c: return f(slots_[b.index].stage_c);
    case EngineBuffer::refresh_stage: return f(refresh_stage_);
    case EngineBuffer::grad_data: return f(gslots_[b.index].data);
    case EngineBuffer::grad_rs_out: return f(gslots_[b.index].rs_out);
    case EngineBuffer::grad_send_bf16: return f(gslots_[b.index].send_bf16);
    case EngineBuffer::grad_recv_bf16: return f(gslots_[b.index].recv_bf16);
    case EngineBuffer::grad_host_rs: return f(gslots_[b.index].host_rs);
  }
}

Backend& FsdpEngine::owner(const BufferSpec& b) { return b.domain == MemDomain::host ? *host_ : be_; }

// Every buffer of the geometry, zeroed (the states start at zero; Adam's m and v must).
void FsdpEngine::allocate() {
  for (const BufferSpec& b : geo_.buffers()) {
    void* p = owner(b).alloc((size_t)b.bytes, b.cat);
    owner(b).zero(p, (size_t)b.bytes);
    with_buffer(b, [&](auto*& member) { member = static_cast<std::remove_reference_t<decltype(member)>>(p); });
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

float* FsdpEngine::state_ptr(int u, ShardState which) {
  if (which != ShardState::param) check_trains("a gradient or Adam shard");
  Unit& s = units_[u];
  switch (which) {
    case ShardState::param: return s.param;
    case ShardState::grad: return s.grad;
    case ShardState::adam_m: return s.m;
    case ShardState::adam_v: return s.v;
  }
  fail("fsdp: unknown shard state");
}

void FsdpEngine::set_unit_from_host(int u, const float* full) {
  const UnitGeometry& g = geo_.units[u];
  if (g.shard_offset == 0 && g.shard_numel == g.numel) {  // the shard is the whole unit: no copy to cut it
    write_shard(u, ShardState::param, full);
    return;
  }
  std::vector<float> mine((size_t)g.shard_numel, 0.0f);
  for (int64_t i = 0; i < g.shard_numel; i++) {
    const int64_t at = g.shard_offset + i;
    if (at < g.numel) mine[i] = full[at];
  }
  shard_from_host(u, ShardState::param, mine);
}

void FsdpEngine::shard_to_host(int u, ShardState which, std::vector<float>& out) {
  out.resize((size_t)geo_.units[u].shard_numel);
  states_->copy_d2h(out.data(), state_ptr(u, which), out.size() * sizeof(float));
  states_->synchronize();
}

// New contents for a shard: no offload copy may still read the host shard rewritten here; a gathered copy
// of the old parameters is dropped, and the device copy refreshed.
void FsdpEngine::shard_from_host(int u, ShardState which, const std::vector<float>& in) {
  GPT_CHECK((int64_t)in.size() == geo_.units[u].shard_numel, "fsdp: shard size mismatch for unit ", name(u));
  write_shard(u, which, in.data());
}

void FsdpEngine::write_shard(int u, ShardState which, const float* in) {
  wait_host_copies();
  states_->copy_h2d(state_ptr(u, which), in, (size_t)geo_.units[u].shard_numel * sizeof(float));
  states_->synchronize();
  if (which != ShardState::param) return;
  GPT_CHECK(!units_[u].held, "fsdp: unit ", name(u), " is in use by the model while its parameters are loaded");
  free_unit(u);
  refresh_device_copy(u);
}

std::vector<float> FsdpEngine::gather_unit_to_host(int u) {
  const UnitGeometry& g = geo_.units[u];
  std::vector<float> mine, full;
  shard_to_host(u, ShardState::param, mine);
  if (geo_.group == 1) {
    full = mine;
  } else {
    full.resize((size_t)g.padded);
    auto* in = static_cast<float*>(be_.alloc(mine.size() * sizeof(float), MemCat::workspace));
    auto* out = static_cast<float*>(be_.alloc(full.size() * sizeof(float), MemCat::workspace));
    be_.copy_h2d(in, mine.data(), mine.size() * sizeof(float));
    be_.synchronize();
    shard_comm_->all_gather(out, in, (size_t)g.shard_numel, DType::F32);
    be_.copy_d2h(full.data(), out, full.size() * sizeof(float));
    be_.synchronize();
    be_.free(in);
    be_.free(out);
  }
  full.resize((size_t)g.numel);
  return full;
}

}  // namespace gpt
