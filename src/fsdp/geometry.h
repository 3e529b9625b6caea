// The FSDP engine's geometry: the shard-group size, each unit's padding and this rank's slice, where the
// model states live, which one-rank paths need no copy, and how many slots and stages the parts use. Pure
// arithmetic over the units' sizes and the options: nothing here allocates. The buffers themselves are
// declared by the parts that use them, a row each, and listed in allocation order by engine_buffer_specs
// (engine_buffers.h); FsdpEngine allocates exactly that list and `gpt memplan` sums it.
//
// The rules it computes (each part's header says how it uses them):
//  - G (the shard group): N for full and grad_op, 1 for none, --shard-group for hybrid. A unit of numel
//    elements is padded to a multiple of G; rank r of the group owns the contiguous slice r.
//  - Model states (fp32 master, grad, Adam m and v shards) live on the device, or on the host when offloaded.
//  - Resident params (G = 1, no offload; resident.h): direct params with fp32 compute, else the compute copy,
//    a persistent compute-dtype copy of each unit whose ledger category is gathered_param (what a gather slot
//    would hold, and it takes the slots' place), so param_shard keeps meaning the fp32 master and model
//    states stay 16 bytes per owned parameter.
//  - Direct grads (one rank, no offload; resident.h): backward accumulates straight into the grad shards.
//  - Gather slots: [0] the root unit's (Note [root unit], param_side.h), then K rotating ones sized for the
//    largest other unit (Note [slot rotation], slot_pool.h), or one per non-root unit under grad_op; none
//    with resident params.
//  - Upload stages (offload params): Note [upload window], shard_uploads.h.
//  - Gradient slots: the root's and 2 rotating ones (none with direct grads or for inference).
//  - Inference (eval, sample): the fp32 param shards only, no gradient or Adam state.
#pragma once
#include <cstdint>
#include <vector>

#include "src/backend/ledger.h"
#include "src/core/dtype.h"
#include "src/fsdp/options.h"

namespace gpt {

// One unit's sharding on this rank.
struct UnitGeometry {
  int64_t numel = 0;         // real elements of the unit
  int64_t padded = 0;        // numel rounded up to a multiple of the shard-group size G
  int64_t shard_numel = 0;   // padded / G: the slice every rank of the group owns
  int64_t shard_offset = 0;  // this rank's first element in the unit's flat index
};

// Every buffer the engine allocates, by name: the key of its row in the part that declares it
// (engine_buffers.h lists where). Per-unit buffers are indexed by unit, slot buffers by slot.
enum class EngineBuffer {
  param, grad, adam_m, adam_v,  // (shard) fp32 model states, in the states' domain
  param_dev,                    // (shard) compute dtype: device copy of the param shard (offload optimizer)
  compute_copy,                 // (shard = padded, G = 1) compute dtype: what the model reads (compute copy)
  nosync_acc,                   // (padded) fp32: the unit's --no-sync gradient accumulator
  slot_data,                    // (padded) compute dtype: a gathered unit
  upload_stage,                 // (shard) fp32: a unit's shard uploaded from the host (offload params)
  slot_shard_compute,           // (shard) compute dtype: the all-gather's input (bf16 compute)
  refresh_f32,                  // (max shard) fp32: a host shard uploaded to refresh param_dev (offload optimizer, bf16)
  grad_data,                    // (padded) fp32: a unit's full gradient
  grad_rs_out,                  // (shard) fp32: the reduce-scatter's output (G > 1)
  grad_send_bf16,               // (padded) bf16: the gradient rounded for a bf16 reduction
  grad_recv_bf16,               // (shard) bf16: the bf16 reduce-scatter's output (G > 1)
  grad_host_rs,                 // (shard, or padded when G = 1) fp32 host copy of the reduced gradient
};

struct BufferSpec {
  EngineBuffer what;
  int index = 0;    // unit or slot
  MemDomain domain;
  MemCat cat;
  int64_t bytes = 0;
};

class EngineGeometry {
 public:
  // unit_numel: the layout's units in order, [0] the root unit (the input convention: the engine passes its
  // layout's units, whose root_unit() it checks is 0). shard_rank: this rank's index in its shard group.
  // Throws the flag's one-line error for an invalid combination (options_check).
  EngineGeometry(const std::vector<int64_t>& unit_numel, int world, int shard_rank, const FsdpOptions& opt,
                 DType compute);

  // G for these options at world size N (after options_check).
  static int shard_group_size(const FsdpOptions& opt, int world);
  // --gather-slots in [1, 64]; --shard-group only with hybrid, and hybrid only with --shard-group: what needs
  // no world size (the flags are checked so as soon as they are parsed).
  static void options_check_flags(const FsdpOptions& opt);
  // options_check_flags, and --shard-group dividing the world size. `world_flag` names where the world size
  // came from in messages ("--world" for memplan, "the world size" for a run).
  static void options_check(const FsdpOptions& opt, int world, const char* world_flag);

  int world = 1;   // N
  int group = 1;   // G
  DType compute = DType::F32;
  FsdpOptions opt;
  bool host_states = false;    // the fp32 states live on the host (offload optimizer or params)
  bool direct_params = false;  // the model reads the fp32 param shards in place
  bool compute_copy = false;   // the model reads each unit's persistent compute-dtype copy, written by AdamW
  bool direct_grads = false;   // backward accumulates into the grad shards
  bool bf16_reduce = false;    // gradients travel in bf16 (--reduce-dtype bf16 and something to communicate)
  int rotating_slots = 0;      // non-root gather slots: min(K, non-root units), all of them under grad_op,
                               // 0 with resident params
  int grad_slots = 0;          // gradient slots, root's included (0 with direct grads)
  std::vector<UnitGeometry> units;
  int64_t max_padded = 0;      // the largest non-root unit, padded: sizes the rotating slots
  int64_t max_shard = 0;       // its shard

  MemDomain states_domain() const { return host_states ? MemDomain::host : MemDomain::device; }
  // The model reads a persistent per-unit buffer (direct params or the compute copy): nothing is gathered.
  bool resident_params() const { return direct_params || compute_copy; }
  int gather_slots() const { return resident_params() ? 0 : 1 + rotating_slots; }
  // Sizes of slot i ([0] root, the others for the largest non-root unit).
  int64_t slot_padded(int i) const { return i == 0 ? units[0].padded : max_padded; }
  int64_t slot_shard(int i) const { return i == 0 ? units[0].shard_numel : max_shard; }
  // Offload params: [0] the root's upload stage, then rotating_slots + 1 for the others (Note [upload window]).
  int upload_stages() const { return opt.offload == OffloadMode::params ? 2 + rotating_slots : 0; }
  int64_t shard_elems() const;  // parameters this rank owns: the sum of the shards
  int64_t psi() const;          // the model's parameters, unpadded
  // Bytes of model states per owned parameter: fp32 param, grad, Adam m and v (16), or the param alone
  // (inference: 4).
  int64_t state_bytes_per_param() const { return opt.inference ? 4 : 16; }
};

}  // namespace gpt
