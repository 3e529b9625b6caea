// The memory planner behind `gpt memplan`: it predicts, before a run is launched, the bytes one rank's
// memory ledger will measure during a training step, per domain (device, host) and per category
// (param_shard ... host_offload), by running the step on the simulated machine (src/sim/sim_step.h) and
// reading its ledger. A closed form beside it (memory_from_geometry) reads the same statements of memory the
// run allocates from: the engine's geometry (fsdp/geometry.h), the activation plan (model/activations.h) and
// the kernels' scratch sizes (kernels/sizes.h). The measured test (tests/fsdp/test_memplan_measured.cpp)
// holds ledger and plan equal byte for byte; tests/sim/test_sim_memory.cpp holds the two plans equal.
//
// Peaks: within a step nothing the ledger tracks is freed (the CUDA backend's scratch block is reserved at
// its full size before step 1 and never grows in a step). So each category's peak is what is live at the
// end of the step, and each domain's peak total is the sum of its categories.
// Every rank holds the same bytes: shards are padded so that every rank's slice has equal length.
//
// Two accountings of model states sit side by side:
//  - ours (what the ledger reports): fp32 master 4 + grad 4 + Adam m 4 + v 4 = 16 bytes per sharded
//    parameter, 16*sum_u ceil(psi_u/G) per rank, plus the gather slots in the compute dtype;
//  - ZeRO's (arXiv 1910.02054, Table 1): (2 + 2 + K)*Psi with K = 12 for mixed-precision Adam (fp16
//    params and grads, fp32 master, momentum and variance), split by stage over N ranks.
#pragma once
#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "kernels/attention_rules.h"
#include "kernels/sizes.h"

#include "src/backend/ledger.h"
#include "src/core/dtype.h"
#include "src/fsdp/geometry.h"
#include "src/fsdp/options.h"
#include "src/model/config.h"
#include "src/model/recompute.h"
#include "src/model/tp_shape.h"
#include "src/model/wrap.h"

namespace gpt {

struct MemPlanInput {
  GPTConfig cfg;              // the model (finalized: padded_vocab_size filled)
  int world = 1;              // N: ranks of the run (DP x TP)
  TpOptions tp;               // --tp, --sequence-parallel: the engine shards over the N / tp.size data-parallel ranks
  FsdpOptions fsdp;           // --shard, --shard-group, --gather-slots, --no-sync, --offload
  RecomputePolicy recompute;  // --recompute: which activations each block keeps
  WrapPolicy wrap;            // --wrap: which blocks form one sharding unit
  bool offload_activations = false;  // --offload ...,activations: the kept activations in host memory
  int B = 4, T = 64;          // per-rank micro-batch (sequences) and sequence length
  DType compute = DType::F32; // compute dtype: F32 = the cpu backend, BF16 = the cuda backend
  // --attention, resolved (resolve_attention_path): fused and cudnn (cuda) keep a (B,NH,T) log-sum-exp instead
  // of (B,NH,T,T) probabilities. The cpu backend has only simple.
  AttentionPath attention = AttentionPath::simple;
  // cudnn: the workspace of cuDNN's attention plans, which only building them on a GPU tells
  // (measured_cudnn_plan_workspace). Empty: counted as 0, and the plan says it is not exact.
  std::optional<cuda::CudnnPlanWorkspace> cudnn_workspace;
  // gpt sample: instead of the activations of a (B, T) step, the key/value cache of T positions
  // (kv_cache_bytes, model/kv_cache.h) and, on cuda, only the cuBLASLt workspace (its ops need no scratch).
  bool sampling = false;
};

struct MemPlan {
  std::array<MemBreakdown, kMemDomains> peak{};  // [domain][category]: bytes at the category's peak in a step
  int64_t device_peak = 0;  // peak total of the device domain during a step
  int64_t host_peak = 0;    // peak total of the host domain during a step
  // False when a term is not known here: the cudnn path without its plans' measured workspace (counted as 0,
  // so the device workspace and peak are lower bounds).
  bool exact = true;
  // The geometry behind the numbers (for reports and tests).
  int group = 1;              // G: shard-group size (N for full/grad_op, 1 for none, --shard-group for hybrid)
  int64_t psi = 0;            // Psi: parameters of the model, padded vocabulary included
  int64_t shard_elems = 0;    // sum over units of ceil(psi_u / G): parameters this rank owns
  int64_t root_padded = 0;    // embed unit padded to a multiple of G (the root gather slot)
  int64_t max_padded = 0;     // largest other unit, padded (one rotating gather slot)
  int rotating_slots = 0;     // rotating gather slots allocated (K; L+1 for grad_op; 0 when none are needed)
  int64_t state_bytes_per_param = 16;  // EngineGeometry's: 16 (training), 4 (inference: the param only)

  int64_t at(MemDomain d, MemCat c) const { return peak[(int)d][(int)c]; }
  // fp32 param + grad + m + v shards, wherever they live: 16 bytes per owned parameter (4 for inference).
  int64_t model_state_bytes() const { return state_bytes_per_param * shard_elems; }
};

// Checks the combination the way the engine, the model and `gpt train` would, with messages naming the
// flag (--shard-group without hybrid, --world not divisible by --shard-group, every:K beyond the layers,
// -T beyond --seq-len, --tp not dividing the heads or the world, ...). plan_memory() calls it first.
void validate_plan_input(const MemPlanInput& in);
// The tensor-parallel checks, against the world size named `world_flag` ("--world", "the world size"):
// --tp divides the heads, the padded vocabulary and the world, and with sequence parallelism the B*T rows.
void check_tp_run(const TpOptions& tp, const GPTConfig& cfg, int world, int B, int T, const char* world_flag);
// The engine's geometry for a run: this rank's tensor-parallel slice of the units (rank 0 of its group: every
// rank's slices are the same size), sharded over the world / tp.size data-parallel ranks.
EngineGeometry engine_geometry(const MemPlanInput& in);
// The sizes of this rank's units (its tensor-parallel slices under the wrap): what engine_geometry shards.
std::vector<int64_t> unit_numels(const MemPlanInput& in);
// The per-rank prediction: one simulated training step's memory ledger (src/sim/sim_step.h); sampling, its
// closed form. Throws gpt::Error on an invalid input or sizes past 2^63 bytes.
MemPlan plan_memory(const MemPlanInput& in);
// The same figures in closed form, from the engine's geometry, the activation plan and the kernels' sizes.
MemPlan memory_from_geometry(const MemPlanInput& in);

// memory_from_geometry's two halves, which a search varies apart (src/plan/plan_search.h): what the engine
// holds (its geometry's buffers: sharding, wrap, gather slots, offload of the states, reduce dtype) and what
// one step of the model holds beside it (activations and workspace: recompute, B, T, activation offload).
// Their sums equal memory_from_geometry's peaks (tests/sim/test_plan_search.cpp).
struct MemTotals {
  int64_t device = 0, host = 0;  // bytes per rank
};
MemTotals engine_memory(const MemPlanInput& in);
// The same, for units already sized (unit_numels(in)): a search that tries many engines on one layout
// builds it once.
MemTotals engine_memory(const MemPlanInput& in, const std::vector<int64_t>& unit_numels);
MemTotals step_memory(const MemPlanInput& in);

// The depth family searched by largest_model_that_fits: member dL has L layers, L heads of 64 channels,
// C = 64*L (nanoGPT/llm.c's aspect ratio). It coincides with the presets d2, d4, d6 and d12; the GPT-2
// medium/large/XL presets (d24, d36, d48) are narrower than the line and are reported beside it by the
// CLI. Vocabulary and sequence length come from `base`.
GPTConfig depth_family_config(int depth, const GPTConfig& base);
constexpr int kMaxFamilyDepth = 1024;  // C = 65536, the largest width GPTConfig accepts

struct ModelFit {
  int depth = 0;    // L of the largest member that fits
  GPTConfig cfg;    // its config
  MemPlan plan;     // its plan
};
// The deepest member of the depth family (starting at d2, or at dK for --recompute every:K) whose device
// peak per rank is at most budget_bytes, with everything but the model taken from `shape`. Throws
// gpt::Error "--budget X: even the smallest model (d2 ...) needs Y" when none fits.
ModelFit largest_model_that_fits(int64_t budget_bytes, const MemPlanInput& shape);

// ZeRO's Table 1 row for Psi parameters at data-parallel degree N, in bytes per rank (K = 12):
//   baseline (2+2+K)Psi, stage 1 (P_os) 4Psi + K*Psi/N, stage 2 (P_os+g) 2Psi + (2+K)Psi/N,
//   stage 3 (P_os+g+p) (2+2+K)Psi/N.
struct ZeroRow {
  double baseline = 0, stage1 = 0, stage2 = 0, stage3 = 0;
};
ZeroRow zero_table(double psi, int N, double K = 12);
// The depth-family member whose Psi (with base's vocabulary and sequence length) is closest to psi: the
// concrete model our accounting is computed for beside ZeRO's (7.5e9 -> d53 with GPT-2's vocabulary).
int closest_family_depth(double psi, const GPTConfig& base);

// "24GiB", "1.5 GB", "512MiB", "2e9" (bytes): 1024-powers for KiB/MiB/GiB/TiB, 1000-powers for
// KB/MB/GB/TB. Throws naming `flag` on anything else.
int64_t parse_byte_size(const std::string& text, const std::string& flag);
// "1.23 GiB", "512.00 MiB", "96 B".
std::string format_bytes(int64_t bytes);

}  // namespace gpt
