// The memory planner (see memplan.h). Every term below mirrors one allocation and says which; sizes are
// summed in 128-bit integers so that an absurd request (d1024 at T = 2^20) is reported, not wrapped.
#include "src/plan/memplan.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>

#include "src/backend/backend.h"
#include "src/core/check.h"

namespace gpt {
namespace {

using wide = __int128;

wide ceil_to(wide n, wide m) { return (n + m - 1) / m * m; }

// Bytes per [domain][category], accumulated wide and narrowed once at the end.
struct Acc {
  wide b[kMemDomains][kMemCats] = {};
  void add(MemDomain d, MemCat c, wide bytes) { b[(int)d][(int)c] += bytes; }
};

// Unit geometry: model/layout.cpp's units, padded as in the FsdpEngine constructor (numel rounded up to
// a multiple of G; rank r owns slice r of length padded/G).
struct Units {
  int count = 0;             // L + 2: embed, block[0..L-1], head
  wide root_numel = 0;       // embed: wte (Vp, C) + wpe (maxT, C)
  wide root_padded = 0, root_shard = 0;
  wide max_padded = 0, max_shard = 0;  // over the non-root units (blocks and head): sizes the pools
  wide sum_padded = 0, sum_shard = 0;  // over all units
  wide psi = 0;
};

Units unit_geometry(const GPTConfig& c, int G) {
  const wide C = c.channels, Vp = c.padded_vocab_size, maxT = c.max_seq_len, L = c.num_layers;
  const wide embed = Vp * C + maxT * C;  // wte (Vp, C), wpe (maxT, C)
  // block: ln1w ln1b (C each), qkvw (3C, C), qkvb (3C), attprojw (C, C), attprojb (C), ln2w ln2b (C each),
  // fcw (4C, C), fcb (4C), fcprojw (C, 4C), fcprojb (C)
  const wide block = 2 * C + (3 * C * C + 3 * C) + (C * C + C) + 2 * C + (4 * C * C + 4 * C) + (4 * C * C + C);
  const wide head = 2 * C;  // lnfw, lnfb
  Units u;
  u.count = c.num_layers + 2;
  u.root_numel = embed;
  u.root_padded = ceil_to(embed, G);
  u.root_shard = u.root_padded / G;
  const wide block_padded = ceil_to(block, G), head_padded = ceil_to(head, G);
  u.max_padded = std::max(block_padded, head_padded);
  u.max_shard = u.max_padded / G;
  u.sum_padded = u.root_padded + L * block_padded + head_padded;
  u.sum_shard = u.sum_padded / G;
  u.psi = embed + L * block + head;
  return u;
}

int shard_group(const MemPlanInput& in) {
  switch (in.fsdp.strategy) {
    case ShardStrategy::full:
    case ShardStrategy::grad_op: return in.world;
    case ShardStrategy::none: return 1;
    case ShardStrategy::hybrid: return in.fsdp.shard_group;
  }
  return 1;
}

// FsdpEngine: allocate_states() and allocate_pools() (src/fsdp/engine.cpp).
void plan_engine(const MemPlanInput& in, const Units& u, int G, Acc& a, MemPlan& p) {
  const wide cs = (wide)dtype_size(in.compute);
  const bool f32 = in.compute == DType::F32;
  const OffloadMode off = in.fsdp.offload;
  const bool host_states = off != OffloadMode::none;                 // FsdpEngine::host_states()
  const bool direct_params = f32 && G == 1 && off == OffloadMode::none;  // FsdpEngine::direct_params()
  const bool direct_grads = in.world == 1 && off == OffloadMode::none;  // FsdpEngine::direct_grads()
  const MemDomain states = host_states ? MemDomain::host : MemDomain::device;
  constexpr MemDomain dev = MemDomain::device, host = MemDomain::host;

  // allocate_states(), per unit: fp32 param, grad, m and v shards (shard_numel each) in the states' domain
  a.add(states, MemCat::param_shard, 4 * u.sum_shard);
  a.add(states, MemCat::grad_shard, 4 * u.sum_shard);
  a.add(states, MemCat::optim_state, 2 * 4 * u.sum_shard);
  // offload=optimizer: param_dev, a compute-dtype device copy of each param shard
  if (off == OffloadMode::optimizer) a.add(dev, MemCat::param_shard, cs * u.sum_shard);
  // --no-sync (unless grads go straight to the shards): nosync_acc, a (padded) fp32 accumulator per unit
  if (in.fsdp.no_sync && !direct_grads) a.add(dev, MemCat::gathered_grad, 4 * u.sum_padded);

  // allocate_pools(): gather slots [0] = root (embed) + `rotating` slots sized for the largest other unit;
  // grad_op keeps every unit gathered from forward to backward, so it has one slot per non-root unit.
  if (!direct_params) {
    p.rotating_slots = in.fsdp.strategy == ShardStrategy::grad_op ? u.count - 1 : in.fsdp.gather_slots;
    const wide slot_padded = u.root_padded + p.rotating_slots * u.max_padded;
    const wide slot_shard = u.root_shard + p.rotating_slots * u.max_shard;
    a.add(dev, MemCat::gathered_param, cs * slot_padded);                               // Slot::data
    if (off == OffloadMode::params) a.add(dev, MemCat::host_offload, 4 * slot_shard);   // Slot::stage_f32
    if (!f32 && off != OffloadMode::optimizer) a.add(dev, MemCat::workspace, cs * slot_shard);  // Slot::stage_c
  }
  // refresh_stage_: fp32 staging to refresh param_dev after a host AdamW (bf16 compute only)
  if (off == OffloadMode::optimizer && !f32) a.add(dev, MemCat::host_offload, 4 * std::max(u.max_shard, u.root_shard));
  // three gradient slots: [0] root + 2 rotating
  if (!direct_grads) {
    const wide g_padded = u.root_padded + 2 * u.max_padded, g_shard = u.root_shard + 2 * u.max_shard;
    if (!in.fsdp.no_sync) a.add(dev, MemCat::gathered_grad, 4 * g_padded);  // GradSlot::data
    if (G > 1) a.add(dev, MemCat::gathered_grad, 4 * g_shard);               // GradSlot::rs_out
    // --reduce-dtype bf16 with something to communicate (FsdpEngine::bf16_reduce()): bf16 send and receive
    if (in.fsdp.reduce_dtype == DType::BF16 && in.world > 1) {
      a.add(dev, MemCat::gathered_grad, 2 * g_padded);            // GradSlot::send_bf16
      if (G > 1) a.add(dev, MemCat::gathered_grad, 2 * g_shard);  // GradSlot::recv_bf16
    }
    if (host_states) a.add(host, MemCat::host_offload, 4 * (G > 1 ? g_shard : g_padded));  // GradSlot::host_rs
  }
}

// Bytes the backend keeps per layer for attention backward (Backend::attention_state_bytes):
// cpu: softmax probabilities (B, NH, T, T) fp32 (kernels/cpu/attention.cpp);
// cuda: the same probabilities in bf16 (kernels/cuda/attention.cu), or with --attention fused the row
// log-sum-exp (B, NH, T) fp32 (kernels/cuda/attention_fused.cu).
wide attention_state_bytes(const MemPlanInput& in) {
  const wide B = in.B, T = in.T, NH = in.cfg.num_heads;
  if (in.fused_attention) return B * NH * T * 4;
  return B * NH * T * T * (wide)dtype_size(in.compute);
}

// The Activations constructor (src/model/activations.cpp). One block's fields, in BlockActs order:
enum Field { ln1, ln1_stats, qkv, atty, att_state, res2, ln2, ln2_stats, fch, fch_gelu, kFields };
// KeptFields::for_layer for a selective layer: matmul outputs, res2 and the layernorm statistics.
constexpr bool kSelectiveKeeps[kFields] = {false, true, true, false, false, true, false, true, true, false};

void plan_activations(const MemPlanInput& in, Acc& a) {
  const GPTConfig& c = in.cfg;
  const wide N = (wide)in.B * in.T, C = c.channels, L = c.num_layers, cs = (wide)dtype_size(in.compute);
  wide field[kFields];
  field[ln1] = N * C * cs;            // (N, C)
  field[ln1_stats] = 2 * N * 4;       // ln1_mean, ln1_rstd (N) fp32
  field[qkv] = N * 3 * C * cs;        // (N, 3C)
  field[atty] = N * C * cs;           // (N, C)
  field[att_state] = attention_state_bytes(in);
  field[res2] = N * C * cs;           // (N, C)
  field[ln2] = N * C * cs;            // (N, C)
  field[ln2_stats] = 2 * N * 4;       // ln2_mean, ln2_rstd (N) fp32
  field[fch] = N * 4 * C * cs;        // (N, 4C)
  field[fch_gelu] = N * 4 * C * cs;   // (N, 4C)

  // Layers by kind (RecomputePolicy): recompute-all (full; every:K for l % K == 0), selective, keep-all.
  const RecomputePolicy& r = in.recompute;
  wide n_all = 0;
  if (r.mode == RecomputePolicy::Mode::full) n_all = L;
  if (r.mode == RecomputePolicy::Mode::every) n_all = (L + r.every_k - 1) / r.every_k;  // l = 0, K, 2K, ...
  const wide n_sel = r.selective() ? L : 0;
  const wide n_keep = L - n_all - n_sel;

  wide kept = 0, scratch = 0;
  for (int f = 0; f < kFields; f++) {
    // fields a layer keeps are its own buffers; a field some layer drops gets ONE shared scratch buffer
    kept += (n_keep + (kSelectiveKeeps[f] ? n_sel : 0)) * field[f];
    const bool dropped_somewhere = n_all > 0 || (n_sel > 0 && !kSelectiveKeeps[f]);
    if (dropped_somewhere) scratch += field[f];
  }
  wide fixed = (L + 1) * N * C * cs;          // resid[0..L] (N, C)
  fixed += N * C * cs + 2 * N * 4;            // lnf (N, C), lnf_mean, lnf_rstd (N)
  fixed += N * c.padded_vocab_size * cs;      // logits (N, Vp), dlogits in place
  fixed += 3 * N * 4;                         // losses (N) fp32, inputs and targets (N) int32
  fixed += N * C * cs;                        // dres (N, C)
  fixed += 2 * N * 4 * C * cs;                // dwide_a, dwide_b (N, 4C)
  fixed += 2 * N * C * cs;                    // dnarrow_a, dnarrow_b (N, C)
  a.add(MemDomain::device, MemCat::activation, kept + scratch + fixed);
}

// The CUDA backend's workspace (src/backend/cuda/cuda_backend.cu): the cuBLASLt workspace allocated at
// construction, and the scratch block that GPT::reserve_workspace sizes before step 1 (CudaBackend::
// reserve_workspace: the largest of these requests at the step's B, T; no op may grow it afterwards):
wide cuda_workspace_bytes(const MemPlanInput& in) {
  constexpr wide kCublasWorkspace = wide(32) << 20;
  constexpr wide kChunks = 64;  // row chunks of the layernorm and bias-gradient reductions
  auto align256 = [](wide b) { return (b + 255) / 256 * 256; };  // kernels/cuda/common.cuh align_up
  const wide N = (wide)in.B * in.T, C = in.cfg.channels, tt = (wide)in.B * in.cfg.num_heads * in.T * in.T;
  wide scratch = 2 * kChunks * C * 4;                       // layernorm_backward_scratch_bytes(N, C)
  scratch = std::max(scratch, kChunks * 4 * C * 4);         // matmul_backward_scratch_bytes, OC up to 4C (fc)
  const wide rows = (wide)in.B * in.cfg.num_heads * in.T;  // fused_attention_scratch_bytes: D (B, NH, T) fp32
  scratch = std::max(scratch, in.fused_attention ? align256(rows * 4)
                                                 : 7 * align256(N * C * 2) + align256(tt * 4) + align256(tt * 2));
  scratch = std::max(scratch, wide(512 + 1) * 8);           // sum_squares_scratch_bytes (always reserved)
  return kCublasWorkspace + scratch;
}

int64_t narrow(wide v) {
  GPT_CHECK(v >= 0 && v <= (wide)std::numeric_limits<int64_t>::max(),
            "memplan: the plan exceeds 2^63 bytes per rank (model or batch too large to plan)");
  return (int64_t)v;
}

}  // namespace

void validate_plan_input(const MemPlanInput& in) {
  const GPTConfig& c = in.cfg;
  if (in.fused_attention) {
    check_fused_attention_backend(in.compute == DType::BF16 ? "cuda" : "cpu");
    check_fused_attention_heads(c.channels, c.num_heads);
  }
  GPT_CHECK(c.padded_vocab_size == (c.vocab_size + 127) / 128 * 128, "memplan: model config is not finalized");
  GPT_CHECK(in.world >= 1, "--world must be >= 1, got ", in.world);
  GPT_CHECK(in.B >= 1 && in.T >= 1, "-B and -T must be >= 1 (got ", in.B, ", ", in.T, ")");
  GPT_CHECK(in.T <= c.max_seq_len, "-T ", in.T, " exceeds --seq-len ", c.max_seq_len);
  GPT_CHECK(in.fsdp.gather_slots >= 1 && in.fsdp.gather_slots <= 64, "--gather-slots must be in [1, 64], got ",
            in.fsdp.gather_slots);
  const bool hybrid = in.fsdp.strategy == ShardStrategy::hybrid;
  GPT_CHECK(hybrid || in.fsdp.shard_group == 0, "--shard-group is only for --shard hybrid");
  GPT_CHECK(!hybrid || in.fsdp.shard_group > 0, "--shard hybrid needs --shard-group G");
  GPT_CHECK(!hybrid || in.world % in.fsdp.shard_group == 0, "--shard-group ", in.fsdp.shard_group,
            " must divide --world ", in.world);
  GPT_CHECK(in.recompute.mode != RecomputePolicy::Mode::every || in.recompute.every_k <= c.num_layers,
            "--recompute every:", in.recompute.every_k, " exceeds the model's ", c.num_layers, " layers");
}

MemPlan plan_memory(const MemPlanInput& in) {
  validate_plan_input(in);
  MemPlan p;
  p.group = shard_group(in);
  const Units u = unit_geometry(in.cfg, p.group);
  Acc a;
  plan_engine(in, u, p.group, a, p);
  plan_activations(in, a);
  if (in.compute == DType::BF16) a.add(MemDomain::device, MemCat::workspace, cuda_workspace_bytes(in));
  for (int d = 0; d < kMemDomains; d++) {
    wide total = 0;
    for (int c = 0; c < kMemCats; c++) {
      p.peak[d][c] = narrow(a.b[d][c]);
      total += a.b[d][c];
    }
    (d == (int)MemDomain::device ? p.device_peak : p.host_peak) = narrow(total);
  }
  p.psi = narrow(u.psi);
  p.shard_elems = narrow(u.sum_shard);
  p.root_padded = narrow(u.root_padded);
  p.max_padded = narrow(u.max_padded);
  return p;
}

GPTConfig depth_family_config(int depth, const GPTConfig& base) {
  GPTConfig c = base;
  c.num_layers = depth;
  c.num_heads = depth;
  c.channels = 64 * depth;
  c.finalize();
  return c;
}

ModelFit largest_model_that_fits(int64_t budget_bytes, const MemPlanInput& shape) {
  const bool every = shape.recompute.mode == RecomputePolicy::Mode::every;
  const int first = std::max(2, every ? shape.recompute.every_k : 2);
  GPT_CHECK(first <= kMaxFamilyDepth, "--recompute every:", shape.recompute.every_k, " exceeds the family's ",
            kMaxFamilyDepth, " layers");
  MemPlanInput in = shape;
  ModelFit best;
  for (int L = first; L <= kMaxFamilyDepth; L++) {
    in.cfg = depth_family_config(L, shape.cfg);
    MemPlan p;
    try {
      p = plan_memory(in);
    } catch (const Error&) {
      if (L == first) throw;  // the input itself is invalid: report that, not a budget problem
      break;                  // past 2^63 bytes: certainly past the budget
    }
    if (p.device_peak > budget_bytes) {
      GPT_CHECK(L > first, "--budget ", format_bytes(budget_bytes), " (", budget_bytes,
                " bytes): even the smallest model (d", L, ": L=", L, " NH=", L, " C=", 64 * L, ", ",
                p.psi, " params) needs ", format_bytes(p.device_peak), " (", p.device_peak,
                " bytes) of device memory per rank with these settings");
      break;
    }
    best.depth = L;
    best.cfg = in.cfg;
    best.plan = p;
  }
  return best;
}

ZeroRow zero_table(double psi, int N, double K) {
  GPT_CHECK(N >= 1, "zero_table: N must be >= 1, got ", N);
  ZeroRow r;
  r.baseline = (2 + 2 + K) * psi;          // fp16 params 2, fp16 grads 2, optimizer states K, all replicated
  r.stage1 = 2 * psi + 2 * psi + K * psi / N;  // P_os: optimizer states partitioned
  r.stage2 = 2 * psi + (2 + K) * psi / N;      // P_os+g: and gradients
  r.stage3 = (2 + 2 + K) * psi / N;            // P_os+g+p: and parameters
  return r;
}

int closest_family_depth(double psi, const GPTConfig& base) {
  int best = 1;
  double best_err = INFINITY;
  for (int L = 1; L <= kMaxFamilyDepth; L++) {
    const double err = std::fabs((double)depth_family_config(L, base).num_params() - psi);
    if (err < best_err) {
      best = L;
      best_err = err;
    }
  }
  return best;
}

int64_t parse_byte_size(const std::string& text, const std::string& flag) {
  const char* s = text.c_str();
  char* end = nullptr;
  errno = 0;
  const double v = std::strtod(s, &end);
  GPT_CHECK(end != s && errno == 0 && std::isfinite(v) && v >= 0, flag, ": expected a size like 24GiB, 512MB or ",
            "1000000000, got '", text, "'");
  std::string unit(end);
  unit.erase(0, unit.find_first_not_of(' '));
  for (char& ch : unit) ch = (char)std::tolower((unsigned char)ch);
  struct U { const char* name; double scale; };
  static const U units[] = {{"", 1},          {"b", 1},           {"kb", 1e3},        {"mb", 1e6},
                            {"gb", 1e9},      {"tb", 1e12},       {"kib", 1024.0},    {"mib", 1048576.0},
                            {"gib", 1073741824.0}, {"tib", 1099511627776.0}};
  for (const U& u : units) {
    if (unit != u.name) continue;
    const double bytes = std::floor(v * u.scale);
    GPT_CHECK(bytes < 9.2e18, flag, ": ", text, " is larger than 2^63 bytes");
    return (int64_t)bytes;
  }
  fail(flag, ": unknown unit '", std::string(end), "' in '", text, "' (use B, KB, MB, GB, TB, KiB, MiB, GiB or TiB)");
}

std::string format_bytes(int64_t bytes) {
  static const char* names[] = {"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  if (bytes < 1024) return str(bytes, " B");
  double v = (double)bytes;
  int i = -1;
  while (v >= 1024 && i < 5) {
    v /= 1024;
    i++;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f %s", v, names[i]);
  return buf;
}

}  // namespace gpt
