// See config_hash.h. FNV-1a over a canonical text of the options.
#include "src/train/config_hash.h"

#include "src/core/check.h"

namespace gpt {

uint64_t config_hash(const TrainOptions& o) {
  const GPTConfig& c = o.model;
  std::string s = str(c.num_layers, ",", c.num_heads, ",", c.channels, ",", c.max_seq_len, ",", c.vocab_size, "|",
                      o.B, ",", o.T, ",", o.total_batch, ",", o.steps, ",", o.lr, ",", o.warmup, ",", o.min_lr_frac,
                      ",", o.optim.weight_decay, ",", o.optim.grad_clip, ",", o.seed, ",", init_rule_name(o.init), "|",
                      FsdpOptions::name(o.fsdp.strategy), ",", o.fsdp.shard_group, ",", o.fsdp.gather_slots, ",",
                      o.fsdp.no_sync, ",", FsdpOptions::name(o.fsdp.offload), ",", o.offload_activations, ",", o.recompute.str(), ",", o.wrap.str(), ",",
                      FsdpOptions::reduce_dtype_name(o.fsdp.reduce_dtype), ",", o.attention, "|",
                      o.train_pattern, "|", o.val_pattern, "|", o.init_from, "|", o.resume);
  uint64_t h = 1469598103934665603ULL;
  for (unsigned char ch : s) {
    h ^= ch;
    h *= 1099511628211ULL;
  }
  return h;
}

void check_same_config_on_all_ranks(Communicator& comm, const TrainOptions& opt) {
  if (comm.world() == 1) return;
  // compare 48-bit halves exactly representable in double
  const uint64_t h = config_hash(opt);
  for (int part = 0; part < 2; part++) {
    const double v = (double)((h >> (part * 32)) & 0xffffffffULL);
    const double hi = comm.all_reduce_max(v), lo = -comm.all_reduce_max(-v);
    GPT_CHECK(hi == lo, "ranks were started with different configurations (config hash differs on rank ",
              comm.rank(), "'s view); launch every rank with the same flags");
  }
}

}  // namespace gpt
