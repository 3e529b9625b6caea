// See sharding_flags.h.
#include "src/cli/sharding_flags.h"

#include "src/core/check.h"
#include "src/fsdp/geometry.h"
#include "src/fsdp/offload_set.h"

namespace gpt {

ShardingFlags parse_sharding_flags(Flags& f) {
  ShardingFlags s;
  s.tp = TpOptions::parse(f.i32("--tp", 1, 1, 1 << 20), f.str("--sequence-parallel", ""));
  s.fsdp.engine = FsdpOptions::parse_engine(f.str("--engine", "full"));
  s.fsdp.strategy = FsdpOptions::parse_strategy(f.str("--shard", "full"));
  s.fsdp.shard_group = f.i32("--shard-group", 0, 0, 1 << 20);
  s.fsdp.gather_slots = f.i32("--gather-slots", 2, 1, 64);
  s.fsdp.no_sync = f.on("--no-sync");
  const OffloadSet off = OffloadSet::parse(f.str("--offload", "none"));
  s.fsdp.offload = off.states;
  s.offload_activations = off.activations;
  s.fsdp.reduce_dtype = FsdpOptions::parse_reduce_dtype(f.str("--reduce-dtype", "fp32"));
  s.recompute = RecomputePolicy::parse(f.str("--recompute", "none"));
  s.wrap = WrapPolicy::parse(f.str("--wrap", "block"));
  EngineGeometry::options_check_flags(s.fsdp);
  // The naive engine has no gather slots (it gathers into a buffer per acquire): a --gather-slots it would
  // ignore is an error, like the options it has no code for (naive_engine.cpp).
  GPT_CHECK(s.fsdp.engine != EngineKind::naive || !f.has("--gather-slots"),
            "--engine naive: --gather-slots is the full engine's (the naive one gathers one unit at a time, waiting)");
  return s;
}

}  // namespace gpt
