// See naive_engine.h: every collective here is waited for before the call returns.
#include "src/fsdp/naive_engine.h"

#include "src/core/check.h"
#include "src/util/trace.h"

namespace gpt {

namespace {
// What the naive engine has no code for: the full engine's options (FsdpOptions says what each does).
const FsdpOptions& naive_options(const FsdpOptions& opt) {
  GPT_CHECK(opt.strategy != ShardStrategy::hybrid, "--engine naive: --shard hybrid is the full engine's (use full, ",
            "grad_op or none)");
  GPT_CHECK(opt.offload == OffloadMode::none, "--engine naive: --offload ", FsdpOptions::name(opt.offload),
            " is the full engine's (only activations offload, which is the model's)");
  GPT_CHECK(!opt.no_sync, "--engine naive: --no-sync is the full engine's");
  GPT_CHECK(opt.reduce_dtype == DType::F32, "--engine naive: --reduce-dtype bf16 is the full engine's");
  GPT_CHECK(!opt.inference, "--engine naive: trains only (eval and sample use the full engine)");
  return opt;
}
}  // namespace

NaiveEngine::NaiveEngine(Backend& be, Communicator& world, const Layout& layout, const FsdpOptions& opt)
    : be_(be),
      world_(world),
      layout_(layout),
      geo_(layout.unit_numels(), world.world(), opt.strategy == ShardStrategy::none ? 0 : world.rank(),
           naive_options(opt), be.compute_dtype()),
      units_(geo_.units.size()) {
  for (size_t u = 0; u < units_.size(); u++) {
    const size_t bytes = (size_t)geo_.units[u].shard_numel * sizeof(float);
    auto take = [&](MemCat cat) {  // a zeroed (shard) fp32 state
      auto* p = static_cast<float*>(be_.alloc(bytes, cat));
      be_.zero(p, bytes);
      return p;
    };
    Unit& x = units_[u];
    x.param = take(MemCat::param_shard);
    x.grad = take(MemCat::grad_shard);
    x.m = take(MemCat::optim_state);
    x.v = take(MemCat::optim_state);
  }
}

NaiveEngine::~NaiveEngine() {
  for (Unit& x : units_) {
    free_full(x);
    if (x.full_grad) be_.free(x.full_grad);
    for (float* p : {x.param, x.grad, x.m, x.v}) be_.free(p);
  }
}

void NaiveEngine::free_full(Unit& x) {
  if (x.full) be_.free(x.full);
  x.full = nullptr;
}

// ---- ParamSource -----------------------------------------------------------------------------------------

const void* NaiveEngine::acquire(int u, Pass) {
  Unit& x = units_[u];
  if (x.full) return x.full;  // grad_op: forward's gather, kept for the backward
  const UnitGeometry& g = geo_.units[u];
  const size_t n = (size_t)g.shard_numel, cs = be_.compute_size();
  trace::Scope span(trace::kGatherSlot0, "gather " + layout_.unit(u).name, "comm");
  x.full = be_.alloc((size_t)g.padded * cs, MemCat::gathered_param);  // (padded) compute dtype
  const void* mine = x.param;
  void* converted = nullptr;  // (shard) compute dtype: the slice in bf16 when the backend computes in bf16
  if (be_.compute_dtype() != DType::F32) {
    converted = be_.alloc(n * cs, MemCat::workspace);
    be_.f32_to_compute(converted, x.param, n);
    mine = converted;
  }
  if (geo_.group > 1) {
    world_.set_label(layout_.unit(u).name);
    world_.all_gather(x.full, mine, n, be_.compute_dtype());  // blocking: returns when every slice is here
  } else {
    be_.copy_d2d(x.full, mine, n * cs);  // one slice is the whole unit
  }
  if (converted) be_.free(converted);
  return x.full;
}

void NaiveEngine::release(int u, Pass pass) {
  if (pass == Pass::forward && geo_.opt.strategy == ShardStrategy::grad_op) return;  // kept for the backward
  free_full(units_[u]);
}

float* NaiveEngine::grad_buffer(int u) {
  Unit& x = units_[u];
  if (!x.full_grad) {
    const size_t bytes = (size_t)geo_.units[u].padded * sizeof(float);
    x.full_grad = static_cast<float*>(be_.alloc(bytes, MemCat::gathered_grad));  // (padded) fp32
    be_.zero(x.full_grad, bytes);
  }
  return x.full_grad;
}

void NaiveEngine::grad_ready(int u) {
  Unit& x = units_[u];
  const UnitGeometry& g = geo_.units[u];
  const size_t n = (size_t)g.shard_numel;
  trace::Scope span(trace::kReduceSlot0, (geo_.group > 1 ? "reduce-scatter " : "all-reduce ") + layout_.unit(u).name,
                    "comm");
  world_.set_label(layout_.unit(u).name);
  if (geo_.group > 1) {  // rank r receives the sum over ranks of slice r of every rank's gradient
    auto* sum = static_cast<float*>(be_.alloc(n * sizeof(float), MemCat::gathered_grad));  // (shard) fp32
    world_.reduce_scatter(sum, x.full_grad, n, DType::F32, ReduceOp::sum);
    be_.accumulate_f32(x.grad, sum, n, (float)geo_.world);  // the mean over ranks: one fp32 division
    be_.free(sum);
  } else {  // one slice: every rank sums the whole unit (an all-reduce; nothing to send on one rank)
    if (geo_.world > 1) world_.all_reduce(x.full_grad, n, DType::F32, ReduceOp::sum);
    be_.accumulate_f32(x.grad, x.full_grad, n, (float)geo_.world);
  }
  be_.free(x.full_grad);
  x.full_grad = nullptr;
}

// ---- the step ------------------------------------------------------------------------------------------

void NaiveEngine::begin_step() {
  for (size_t u = 0; u < units_.size(); u++) {
    free_full(units_[u]);  // what a forward-only pass (eval) kept under grad_op
    be_.zero(units_[u].grad, (size_t)geo_.units[u].shard_numel * sizeof(float));
  }
}

double NaiveEngine::grad_sumsq(const TensorFilter& counted) {
  std::vector<const float*> xs;
  std::vector<size_t> ns;
  for (size_t u = 0; u < units_.size(); u++) {
    const UnitGeometry& g = geo_.units[u];
    if (!counted) {  // the whole shard at once: FsdpEngine's sum, in its order
      xs.push_back(units_[u].grad);
      ns.push_back((size_t)g.shard_numel);
      continue;
    }
    for (const SegmentSpan& s : shard_segments(layout_, (int)u, g.shard_offset, g.shard_numel))
      if (counted(*s.tensor)) {
        xs.push_back(units_[u].grad + s.offset);
        ns.push_back((size_t)s.n);
      }
  }
  const double mine = be_.sum_squares_all(xs.data(), ns.data(), (int)xs.size());
  return geo_.group > 1 ? world_.all_reduce_scalar(mine, ReduceOp::sum) : mine;  // slices are disjoint: add them
}

void NaiveEngine::update_params(const SegmentUpdate& update) {
  for (size_t u = 0; u < units_.size(); u++) {
    Unit& x = units_[u];
    free_full(x);  // a kept gather holds the old parameters
    for (const SegmentSpan& s : shard_segments(layout_, (int)u, geo_.units[u].shard_offset, geo_.units[u].shard_numel))
      update(be_, ShardSegment{x.param + s.offset, nullptr, x.grad + s.offset, x.m + s.offset, x.v + s.offset,
                               (size_t)s.n, s.decay});
  }
}

// ---- whole-unit transfers ------------------------------------------------------------------------------

float* NaiveEngine::state(int u, ShardState which) {
  Unit& x = units_[u];
  switch (which) {
    case ShardState::param: return x.param;
    case ShardState::grad: return x.grad;
    case ShardState::adam_m: return x.m;
    case ShardState::adam_v: return x.v;
  }
  fail("fsdp: unknown shard state");
}

std::vector<float> NaiveEngine::gather_unit_to_host(int u) {
  std::vector<float> mine;
  shard_to_host(u, ShardState::param, mine);
  return gather_shards_to_host(be_, world_, geo_.units[u], mine, layout_.unit(u).name);
}

void NaiveEngine::shard_to_host(int u, ShardState which, std::vector<float>& out) {
  out.resize((size_t)geo_.units[u].shard_numel);
  be_.copy_d2h(out.data(), state(u, which), out.size() * sizeof(float));
  be_.synchronize();
}

void NaiveEngine::shard_from_host(int u, ShardState which, const std::vector<float>& in) {
  GPT_CHECK((int64_t)in.size() == geo_.units[u].shard_numel, "fsdp: shard size mismatch for unit ", layout_.unit(u).name);
  free_full(units_[u]);  // a kept gather of the old parameters
  be_.copy_h2d(state(u, which), in.data(), in.size() * sizeof(float));
  be_.synchronize();
}

}  // namespace gpt
