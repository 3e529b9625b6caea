// FsdpEngine: the shard groups, the three parts (states, parameter side, gradient side) wired together, the
// step's call order and its checks, and whole-unit transfers used by init, load, checkpoints and export.
#include "src/fsdp/engine.h"

#include "src/core/check.h"
#include "src/util/trace.h"

namespace gpt {

namespace {
// The units' sizes, the root first (EngineGeometry's input convention).
std::vector<int64_t> unit_sizes(const Layout& layout) {
  GPT_CHECK(layout.root_unit() == 0, "fsdp: the layout's root unit must be unit 0, got ", layout.root_unit());
  return layout.unit_numels();
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
      world_(world),
      layout_(layout),
      shard_comm_(split_shard_group(world, opt)),
      replica_comm_(world.split_strided(shard_comm_->world())),
      geo_(unit_sizes(layout_), world.world(), shard_comm_->rank(), opt, be.compute_dtype()),
      store_(be_, layout_, geo_),
      params_(be_, *shard_comm_, layout_, geo_, store_, [this] { trace_counters(); }),
      grads_(be_, *shard_comm_, *replica_comm_, layout_, geo_, store_, params_, [this] { trace_counters(); }) {}

FsdpEngine::~FsdpEngine() {
  try {
    finish_backward();
  } catch (...) {
  }
}

// ---- ParamSource ------------------------------------------------------------------------------------

const void* FsdpEngine::acquire(int u, Pass pass) {
  if (pass == Pass::backward) store_.check_trains("a backward");
  return params_.acquire(u, pass);
}

void FsdpEngine::release(int u, Pass pass) { params_.release(u, pass); }
float* FsdpEngine::grad_buffer(int u) { return grads_.grad_buffer(u); }
void FsdpEngine::grad_ready(int u) { grads_.grad_ready(u); }

// ---- the step -----------------------------------------------------------------------------------------

void FsdpEngine::check_quiet(const char* what) const {
  for (int u = 0; u < num_units(); u++) {
    params_.check_not_held(u, what);
    grads_.check_closed(u, what);
  }
  grads_.check_none_in_flight(what);
}

void FsdpEngine::begin_step() {
  store_.check_trains("begin_step");
  check_quiet("begin_step");
  params_.free_all();  // what eval or sample left gathered: a step starts fully sharded
  store_.zero_grads();
}

void FsdpEngine::begin_micro_step(bool last_micro_step) { grads_.begin_micro_step(last_micro_step); }

void FsdpEngine::finish_backward() {
  grads_.finish();
  store_.wait_host_copies();  // no copy still reads a host shard the optimizer is about to write
}

double FsdpEngine::grad_sumsq() {
  store_.check_trains("grad_sumsq");
  check_quiet("grad_sumsq");
  const double local = store_.grad_sumsq();
  return geo_.group > 1 ? shard_comm_->all_reduce_scalar(local, ReduceOp::sum) : local;
}

void FsdpEngine::update_params(const std::function<void(Backend& states, const ShardSegment&)>& update) {
  store_.check_trains("update_params");
  check_quiet("update_params");
  params_.free_all();  // gathered copies of the old parameters
  store_.update(update);
}

void FsdpEngine::trace_counters() {
  if (!trace::on()) return;
  trace::counter("gathered params in use", params_.bytes_in_use());
  trace::counter("gradient slots in use", grads_.bytes_in_use());
  const int64_t in_flight = shard_comm_->ledger().in_flight() + replica_comm_->ledger().in_flight();
  trace::counter("comm bytes in flight", (double)in_flight);
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

// ---- whole-unit transfers -----------------------------------------------------------------------------

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

void FsdpEngine::shard_to_host(int u, ShardState which, std::vector<float>& out) { store_.read(u, which, out); }

void FsdpEngine::shard_from_host(int u, ShardState which, const std::vector<float>& in) {
  GPT_CHECK((int64_t)in.size() == geo_.units[u].shard_numel, "fsdp: shard size mismatch for unit ",
            layout_.unit(u).name);
  write_shard(u, which, in.data());
}

// New contents for a shard; for the params, a gathered copy of the old ones is dropped and the device copy
// refreshed.
void FsdpEngine::write_shard(int u, ShardState which, const float* in) {
  store_.write(u, which, in);
  if (which != ShardState::param) return;
  params_.reload(u);
  store_.refresh_device_copy(u);
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
    shard_comm_->set_label(layout_.unit(u).name);
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
