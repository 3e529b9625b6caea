// See geometry.h. The order of buffers() is the order the engine allocates in: per-unit states, then the
// gather pool, then the gradient pool.
#include "src/fsdp/geometry.h"

#include <algorithm>

#include "src/core/check.h"

namespace gpt {

void EngineGeometry::options_check(const FsdpOptions& opt, int world, const char* world_flag) {
  GPT_CHECK(world >= 1, world_flag, " must be >= 1, got ", world);
  GPT_CHECK(opt.gather_slots >= 1 && opt.gather_slots <= 64, "--gather-slots must be in [1, 64], got ",
            opt.gather_slots);
  const bool hybrid = opt.strategy == ShardStrategy::hybrid;
  GPT_CHECK(hybrid || opt.shard_group == 0, "--shard-group is only for --shard hybrid");
  GPT_CHECK(!hybrid || opt.shard_group > 0, "--shard hybrid needs --shard-group G");
  GPT_CHECK(!hybrid || world % opt.shard_group == 0, "--shard-group ", opt.shard_group, " must divide ", world_flag,
            " ", world);
}

int EngineGeometry::shard_group_size(const FsdpOptions& opt, int world) {
  switch (opt.strategy) {
    case ShardStrategy::full:
    case ShardStrategy::grad_op: return world;
    case ShardStrategy::none: return 1;
    case ShardStrategy::hybrid: return opt.shard_group;
  }
  return 1;
}

EngineGeometry::EngineGeometry(const std::vector<int64_t>& unit_numel, int world_, int shard_rank,
                               const FsdpOptions& opt_, DType compute_)
    : world(world_), compute(compute_), opt(opt_) {
  GPT_CHECK(unit_numel.size() >= 2, "fsdp geometry: needs the root unit and at least one other");
  group = shard_group_size(opt, world);
  GPT_CHECK(shard_rank >= 0 && shard_rank < group, "fsdp geometry: shard rank ", shard_rank, " outside a group of ",
            group);
  const OffloadMode off = opt.offload;
  host_states = off != OffloadMode::none;
  direct_params = compute == DType::F32 && group == 1 && off == OffloadMode::none;
  compute_copy = compute != DType::F32 && group == 1 && off == OffloadMode::none;
  direct_grads = world == 1 && off == OffloadMode::none;
  bf16_reduce = opt.reduce_dtype == DType::BF16 && world > 1;
  for (size_t u = 0; u < unit_numel.size(); u++) {
    UnitGeometry g;
    g.numel = unit_numel[u];
    g.padded = (g.numel + group - 1) / group * group;
    g.shard_numel = g.padded / group;
    g.shard_offset = (int64_t)shard_rank * g.shard_numel;
    if (u > 0) {
      max_padded = std::max(max_padded, g.padded);
      max_shard = std::max(max_shard, g.shard_numel);
    }
    units.push_back(g);
  }
  if (!resident_params())
    rotating_slots = opt.strategy == ShardStrategy::grad_op ? (int)units.size() - 1 : opt.gather_slots;
  if (!direct_grads && !opt.inference) grad_slots = 3;
}

int64_t EngineGeometry::shard_elems() const {
  int64_t n = 0;
  for (const UnitGeometry& u : units) n += u.shard_numel;
  return n;
}

int64_t EngineGeometry::psi() const {
  int64_t n = 0;
  for (const UnitGeometry& u : units) n += u.numel;
  return n;
}

std::vector<BufferSpec> EngineGeometry::buffers() const {
  const int64_t cs = (int64_t)dtype_size(compute);
  const bool f32 = compute == DType::F32;
  const OffloadMode off = opt.offload;
  constexpr MemDomain dev = MemDomain::device, host = MemDomain::host;
  std::vector<BufferSpec> b;
  auto add = [&](EngineBuffer what, int index, MemDomain d, MemCat c, int64_t bytes) {
    b.push_back(BufferSpec{what, index, d, c, bytes});
  };
  for (int u = 0; u < (int)units.size(); u++) {
    const int64_t shard = units[u].shard_numel, padded = units[u].padded;
    add(EngineBuffer::param, u, states_domain(), MemCat::param_shard, 4 * shard);
    if (!opt.inference) {
      add(EngineBuffer::grad, u, states_domain(), MemCat::grad_shard, 4 * shard);
      add(EngineBuffer::adam_m, u, states_domain(), MemCat::optim_state, 4 * shard);
      add(EngineBuffer::adam_v, u, states_domain(), MemCat::optim_state, 4 * shard);
    }
    if (off == OffloadMode::optimizer) add(EngineBuffer::param_dev, u, dev, MemCat::param_shard, cs * shard);
    if (compute_copy) add(EngineBuffer::compute_copy, u, dev, MemCat::gathered_param, cs * shard);
    if (opt.no_sync && !direct_grads && !opt.inference)
      add(EngineBuffer::nosync_acc, u, dev, MemCat::gathered_grad, 4 * padded);
  }
  for (int i = 0; i < gather_slots(); i++) {
    add(EngineBuffer::slot_data, i, dev, MemCat::gathered_param, cs * slot_padded(i));
    if (off == OffloadMode::params) add(EngineBuffer::slot_stage_f32, i, dev, MemCat::host_offload, 4 * slot_shard(i));
    if (!f32 && off != OffloadMode::optimizer) add(EngineBuffer::slot_stage_c, i, dev, MemCat::workspace, cs * slot_shard(i));
  }
  if (off == OffloadMode::optimizer && !f32)
    add(EngineBuffer::refresh_stage, 0, dev, MemCat::host_offload, 4 * std::max(max_shard, units[0].shard_numel));
  for (int i = 0; i < grad_slots; i++) {
    const int64_t padded = slot_padded(i), shard = slot_shard(i);
    if (!opt.no_sync) add(EngineBuffer::grad_data, i, dev, MemCat::gathered_grad, 4 * padded);
    if (group > 1) add(EngineBuffer::grad_rs_out, i, dev, MemCat::gathered_grad, 4 * shard);
    if (bf16_reduce) {
      add(EngineBuffer::grad_send_bf16, i, dev, MemCat::gathered_grad, 2 * padded);
      if (group > 1) add(EngineBuffer::grad_recv_bf16, i, dev, MemCat::gathered_grad, 2 * shard);
    }
    if (host_states) add(EngineBuffer::grad_host_rs, i, host, MemCat::host_offload, 4 * (group > 1 ? shard : padded));
  }
  return b;
}

}  // namespace gpt
