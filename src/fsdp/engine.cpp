// FsdpEngine: the shard groups, the parts chosen for the geometry and wired together, the step's moments and
// their checks, and whole-unit transfers used by init, load, checkpoints and export.
#include "src/fsdp/engine.h"

#include "src/core/check.h"
#include "src/fsdp/grad_nosync.h"
#include "src/fsdp/grad_side.h"
#include "src/fsdp/param_side.h"
#include "src/fsdp/resident.h"
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
      order_(layout_),
      params_(choose_param_supply()),
      grads_(choose_grad_sink()) {}

FsdpEngine::~FsdpEngine() {
  try {
    finish_backward();
  } catch (...) {
  }
}

// ---- the parts, chosen once ---------------------------------------------------------------------------

// One rank's own buffers when there is nothing to gather (G = 1 and the states on the device); else the
// gather side over the source of its input.
std::unique_ptr<ParamSupply> FsdpEngine::choose_param_supply() {
  if (geo_.resident_params()) return std::make_unique<ResidentParams>(geo_, store_);
  source_ = make_shard_source(be_, layout_, geo_, store_);
  return std::make_unique<ParamSide>(be_, *shard_comm_, layout_, geo_, store_.buffers(), *source_,
                                     [this] { trace_counters(); });
}

// Straight into the grad shards when there is nothing to reduce (one rank, no offload); else the gradient
// slots, reducing every micro-step or (--no-sync) the last one only.
std::unique_ptr<GradSink> FsdpEngine::choose_grad_sink() {
  if (geo_.direct_grads) return std::make_unique<DirectGrads>(store_);
  auto reducer = make_grad_reducer(be_, *shard_comm_, *replica_comm_, layout_, geo_);
  auto changed = [this] { trace_counters(); };
  if (geo_.opt.no_sync) return std::make_unique<NoSyncGrads>(be_, layout_, geo_, store_, std::move(reducer), changed);
  return std::make_unique<GradSide>(be_, layout_, geo_, store_, std::move(reducer), changed);
}

// ---- ParamSource ------------------------------------------------------------------------------------

const void* FsdpEngine::acquire(int u, Pass pass) {
  if (pass == Pass::backward) store_.check_trains("a backward");
  order_.acquire(u, pass);
  return params_->acquire(u, pass);
}

void FsdpEngine::release(int u, Pass pass) {
  order_.release(u, pass);
  params_->release(u, pass);
}

float* FsdpEngine::grad_buffer(int u) {
  const bool opens = order_.grad_buffer(u);
  return grads_->grad_buffer(u, opens);
}

void FsdpEngine::grad_ready(int u) {
  order_.grad_ready(u);
  grads_->grad_ready(u);
}

// ---- the step -----------------------------------------------------------------------------------------

void FsdpEngine::check_quiet(const char* what) const {
  order_.check_quiet(what);
  GPT_CHECK(!grads_->in_flight(), "fsdp: ", what, " while gradient reductions are in flight (finish_backward first)");
}

void FsdpEngine::begin_step() {
  store_.check_trains("begin_step");
  check_quiet("begin_step");
  params_->free_all();  // what eval or sample left gathered: a step starts fully sharded
  store_.zero_grads();
}

void FsdpEngine::finish_backward() {
  grads_->finish();
  store_.wait_host_copies();  // no copy still reads a host shard the optimizer is about to write
}

double FsdpEngine::grad_sumsq() {
  store_.check_trains("grad_sumsq");
  check_quiet("grad_sumsq");
  const double local = store_.grad_sumsq();
  return geo_.group > 1 ? shard_comm_->all_reduce_scalar(local, ReduceOp::sum) : local;
}

double FsdpEngine::grad_sumsq(const TensorFilter& counted) {
  store_.check_trains("grad_sumsq");
  check_quiet("grad_sumsq");
  const double local = store_.grad_sumsq(&counted);
  return geo_.group > 1 ? shard_comm_->all_reduce_scalar(local, ReduceOp::sum) : local;
}

void FsdpEngine::update_params(const SegmentUpdate& update) {
  store_.check_trains("update_params");
  check_quiet("update_params");
  params_->free_all();  // gathered copies of the old parameters
  store_.update(update);
}

void FsdpEngine::trace_counters() {
  if (!trace::on()) return;
  trace::counter("gathered params in use", params_ ? params_->bytes_in_use() : 0);
  trace::counter("gradient slots in use", grads_ ? grads_->bytes_in_use() : 0);
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
  ShardingEngine::set_unit_from_host(u, full);
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
  if (which == ShardState::param) order_.check_not_held(u, "loading parameters");
  store_.write(u, which, in);
  if (which != ShardState::param) return;
  params_->reload(u);
  store_.refresh_device_copy(u);
}

std::vector<float> FsdpEngine::gather_unit_to_host(int u) {
  std::vector<float> mine;
  shard_to_host(u, ShardState::param, mine);
  return gather_shards_to_host(be_, *shard_comm_, geo_.units[u], mine, layout_.unit(u).name);
}

}  // namespace gpt
