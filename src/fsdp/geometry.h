// The FSDP engine's geometry: the shard-group size, each unit's padding and this rank's slice, where the
// model states live, which paths need no copy, and every buffer the engine allocates, with its domain,
// ledger category and size. Pure arithmetic over the units' sizes and the options: nothing here allocates.
//
// It is the one statement of the engine's memory. buffers() lists the rows the engine's parts declare
// (engine_buffers.h: adding a buffer is one row there, in the part that uses it); FsdpEngine allocates
// exactly that list (and nothing else), and `gpt memplan` sums the same list, so the two cannot drift apart;
// the measured test (tests/fsdp/test_memplan_measured.cpp) still holds the ledger equal to the plan byte for
// byte.
//
// The rules, stated once:
//  - G (the shard group): N for full and grad_op, 1 for none, --shard-group for hybrid. A unit of numel
//    elements is padded to a multiple of G; rank r of the group owns the contiguous slice r.
//  - Model states (fp32 master, grad, Adam m and v shards) live on the device, or on the host when offloaded.
//  - Direct params: fp32 compute, G = 1 and no offload: the model reads the fp32 shards in place (no slot).
//  - Compute copy: compute dtype other than fp32 (bf16 on cuda), G = 1 and no offload: every unit keeps a
//    persistent compute-dtype copy of its (whole, since G = 1) parameters, which AdamW writes in the same pass
//    as the fp32 master (Backend::adamw_update's param_out) and loading refreshes (f32_to_compute); the model
//    reads it in place. No gather slots, no staging, no conversion per acquire. Its ledger category is
//    gathered_param: it is what a gather slot would hold (the unit's full parameters in the compute dtype,
//    what the model reads between acquire and release) and takes the slots' place, while param_shard keeps
//    meaning the fp32 master, so model states stay 16 bytes per owned parameter. It costs 2 bytes per
//    parameter instead of the slots' root + K x largest unit (and their staging).
//  - Direct grads: one rank and no offload: backward accumulates straight into the grad shards.
//  - Gather slots: [0] the root unit (Layout::root_unit); then K rotating slots sized for the largest other unit
//    (--gather-slots), or one per non-root unit under grad_op (forward's gather is kept until backward).
//  - Upload stages (offload params): [0] the root's shard, then one more than the rotating slots sized for the
//    largest other shard: the upload of a unit runs one unit ahead of its gather (param_side.h).
//  - Inference (eval, sample): the fp32 param shards only, no gradient or Adam state and no gradient slots.
//  - Gradient slots: [0] the root's, then 2 rotating ones, each a full-unit fp32 buffer (none with --no-sync,
//    whose per-unit accumulators take their place), plus the reduce-scatter output (G > 1), the bf16 send and
//    receive buffers (--reduce-dtype bf16 with more than one rank) and the host copy of the reduced shard
//    (offload).
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
// (engine_buffers.h). Per-unit buffers are indexed by unit, slot buffers by slot.
enum class EngineBuffer {
  param, grad, adam_m, adam_v,  // (shard) fp32 model states, in the states' domain
  param_dev,                    // (shard) compute dtype: device copy of the param shard (offload optimizer)
  compute_copy,                 // (shard = padded, G = 1) compute dtype: what the model reads (compute copy)
  nosync_acc,                   // (padded) fp32: the unit's --no-sync gradient accumulator
  slot_data,                    // (padded) compute dtype: a gathered unit
  upload_stage,                 // (shard) fp32: a unit's shard uploaded from the host (offload params)
  slot_stage_c,                 // (shard) compute dtype: the all-gather's input (bf16 compute)
  refresh_stage,                // (max shard) fp32: staging to refresh param_dev (offload optimizer, bf16)
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
  // --gather-slots in [1, 64]; --shard-group only with hybrid, and then dividing the world size. `world_flag`
  // names where the world size came from in messages ("--world" for memplan, "the world size" for a run).
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
  // Offload params: [0] the root's upload stage, then rotating_slots + 1 for the others (0 without).
  int upload_stages() const { return opt.offload == OffloadMode::params ? 2 + rotating_slots : 0; }
  int64_t shard_elems() const;  // parameters this rank owns: the sum of the shards
  int64_t psi() const;          // the model's parameters, unpadded
  // Bytes of model states per owned parameter: fp32 param, grad, Adam m and v (16), or the param alone
  // (inference: 4).
  int64_t state_bytes_per_param() const { return opt.inference ? 4 : 16; }
  std::vector<BufferSpec> buffers() const;
};

}  // namespace gpt
