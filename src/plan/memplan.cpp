// The memory planner (see memplan.h). plan_memory runs one training step on the simulated machine
// (src/sim/sim_step.h) and reads its memory ledger. memory_from_geometry is the closed form beside it: it
// restates no allocation rule either (the engine's buffers come from its geometry, fsdp/geometry.h, the
// activations from their plan, model/activations.h, and the CUDA backend's workspace from the kernels'
// sizes, kernels/sizes.h), sums in 128-bit integers so that an absurd request (d1024 at T = 2^20) is
// reported, not wrapped, and covers sampling, which runs no training step. Tests hold the two equal, and
// both equal to a real run's ledger.
#include "src/plan/memplan.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>

#include "kernels/attention_rules.h"
#include "kernels/sizes.h"
#include "src/core/check.h"
#include "src/fsdp/engine_buffers.h"
#include "src/fsdp/geometry.h"
#include "src/model/activations.h"
#include "src/model/gpt.h"
#include "src/model/kv_cache.h"
#include "src/model/layout.h"
#include "src/sim/sim_step.h"

namespace gpt {
namespace {

using wide = __int128;

// Bytes per [domain][category], accumulated wide and narrowed once at the end.
struct Acc {
  wide b[kMemDomains][kMemCats] = {};
  void add(MemDomain d, MemCat c, wide bytes) { b[(int)d][(int)c] += bytes; }
};

// Sizes saturate at INT64_MAX (kernels/sizes.h, core/size_math.h), so INT64_MAX itself means "too large".
int64_t narrow(wide v) {
  GPT_CHECK(v >= 0 && v < (wide)std::numeric_limits<int64_t>::max(),
            "memplan: the plan exceeds 2^63 bytes per rank (model or batch too large to plan)");
  return (int64_t)v;
}

// Bytes the backend keeps per layer for attention backward (Backend::attention_state_bytes), of this rank's heads.
int64_t attention_state_bytes(const MemPlanInput& in) {
  const int64_t B = in.B, T = in.T, NH = in.cfg.num_heads / in.tp.size;
  if (in.compute == DType::F32) return cpu::attention_state_bytes(B, T, NH);
  return cuda::attention_state_bytes(in.attention, B, T, NH);
}

// The CUDA backend's workspace: the cuBLASLt workspace allocated at construction, and the scratch block that
// GPT::reserve_workspace sizes before step 1 (the widest matmul with a bias is fc, 4C/tp outputs; on the cudnn
// path, with the cuDNN plans' workspace when it was measured, else 0).
wide cuda_workspace_bytes(const MemPlanInput& in) {
  const GPTConfig& c = in.cfg;
  const int64_t tp = in.tp.size;
  return (wide)cuda::kCublasWorkspaceBytes +
         cuda::op_scratch_bytes(in.B, in.T, c.channels, c.num_heads, GPT::max_bias_outputs(c, (int)tp), in.attention,
                                in.cudnn_workspace.value_or(cuda::CudnnPlanWorkspace{}), tp);
}

}  // namespace

void validate_plan_input(const MemPlanInput& in) {
  const GPTConfig& c = in.cfg;
  if (in.attention != AttentionPath::simple) {
    GPT_CHECK(in.compute == DType::BF16, "--attention ", attention_path_name(in.attention),
              ": the cpu backend has only the simple path (use --device cuda)");
    // (cudnn's rules depend on the GPU: the caller resolved the path against one, resolve_attention_path)
    if (in.attention == AttentionPath::fused) check_fused_attention_heads(c.channels, c.num_heads);
  }
  GPT_CHECK(c.padded_vocab_size == (c.vocab_size + 127) / 128 * 128, "memplan: model config is not finalized");
  GPT_CHECK(in.B >= 1 && in.T >= 1, "-B and -T must be >= 1 (got ", in.B, ", ", in.T, ")");
  GPT_CHECK(in.T <= c.max_seq_len, "-T ", in.T, " exceeds --seq-len ", c.max_seq_len);
  check_tp_run(in.tp, c, in.world, in.B, in.T, "--world");
  EngineGeometry::options_check(in.fsdp, in.world / in.tp.size, in.tp.size > 1 ? "the data-parallel size --world/--tp" : "--world");
  GPT_CHECK(in.recompute.mode != RecomputePolicy::Mode::every || in.recompute.every_k <= c.num_layers,
            "--recompute every:", in.recompute.every_k, " exceeds the model's ", c.num_layers, " layers");
}

void check_tp_run(const TpOptions& tp, const GPTConfig& cfg, int world, int B, int T, const char* world_flag) {
  GPT_CHECK(tp.size >= 1, "--tp must be >= 1, got ", tp.size);
  if (tp.size == 1) return;
  GPT_CHECK(tp.size <= world, "--tp ", tp.size, " is larger than ", world_flag, " ", world);
  GPT_CHECK(world % tp.size == 0, "--tp ", tp.size, " must divide ", world_flag, " ", world,
            " (world = data-parallel x tensor-parallel ranks)");
  check_tp_shape(cfg, TpShape{tp.size, 0});
  const int64_t rows = (int64_t)B * T;
  GPT_CHECK(!tp.sequence_parallel || rows % tp.size == 0, "--sequence-parallel on: --tp ", tp.size,
            " must divide the B*T = ", rows, " rows of a micro-batch (-B ", B, " -T ", T,
            "), each rank keeping an equal share");
}

EngineGeometry engine_geometry(const MemPlanInput& in) {
  return EngineGeometry(unit_numels(in), in.world / in.tp.size, 0, in.fsdp, in.compute);
}

std::vector<int64_t> unit_numels(const MemPlanInput& in) {
  return Layout(in.cfg, in.wrap, TpShape{in.tp.size, 0}).unit_numels();
}

namespace {

// What the engine holds: its geometry's buffers.
void add_engine(Acc& a, const EngineGeometry& geo) {
  for (const BufferSpec& b : engine_buffer_specs(geo)) a.add(b.domain, b.cat, b.bytes);
}

// What one step of the model holds beside the engine: the activations (or the sampler's key/value cache) and
// the CUDA backend's workspace.
void add_step(Acc& a, const MemPlanInput& in) {
  const int64_t cs = (int64_t)dtype_size(in.compute);
  if (in.sampling) {
    a.add(MemDomain::device, MemCat::activation, kv_cache_bytes(in.cfg, in.T, cs, in.tp.size));
    if (in.compute == DType::BF16) a.add(MemDomain::device, MemCat::workspace, (wide)cuda::kCublasWorkspaceBytes);
  } else {
    const ActivationPlan acts =
        plan_activations(in.cfg, in.recompute, in.B, in.T, cs, attention_state_bytes(in), in.offload_activations, in.tp,
                         GPT::replicated_grad_scratch(Layout(in.cfg, in.wrap, TpShape{in.tp.size, 0})));
    a.add(MemDomain::device, MemCat::activation, acts.total_bytes());
    a.add(MemDomain::host, MemCat::activation, acts.host_bytes());  // token-id staging, offloaded activations
    if (in.compute == DType::BF16) a.add(MemDomain::device, MemCat::workspace, cuda_workspace_bytes(in));
  }
}

MemTotals totals(const Acc& a) {
  wide t[kMemDomains] = {};
  for (int d = 0; d < kMemDomains; d++)
    for (int c = 0; c < kMemCats; c++) t[d] += a.b[d][c];
  return {narrow(t[(int)MemDomain::device]), narrow(t[(int)MemDomain::host])};
}

}  // namespace

MemTotals engine_memory(const MemPlanInput& in) { return engine_memory(in, unit_numels(in)); }

MemTotals engine_memory(const MemPlanInput& in, const std::vector<int64_t>& numels) {
  validate_plan_input(in);
  Acc a;
  add_engine(a, EngineGeometry(numels, in.world / in.tp.size, 0, in.fsdp, in.compute));
  return totals(a);
}

MemTotals step_memory(const MemPlanInput& in) {
  validate_plan_input(in);
  Acc a;
  add_step(a, in);
  return totals(a);
}

MemPlan memory_from_geometry(const MemPlanInput& in) {
  validate_plan_input(in);
  const EngineGeometry geo = engine_geometry(in);
  Acc a;
  add_engine(a, geo);
  add_step(a, in);
  MemPlan p;
  p.exact = in.sampling || !(in.compute == DType::BF16 && in.attention == AttentionPath::cudnn &&
                             !in.cudnn_workspace && !cuda::cudnn_attention_closed_form(in.T));
  for (int d = 0; d < kMemDomains; d++) {
    wide total = 0;
    for (int c = 0; c < kMemCats; c++) {
      p.peak[d][c] = narrow(a.b[d][c]);
      total += a.b[d][c];
    }
    (d == (int)MemDomain::device ? p.device_peak : p.host_peak) = narrow(total);
  }
  p.group = geo.group;
  p.psi = geo.psi();
  p.shard_elems = geo.shard_elems();
  p.root_padded = geo.units[0].padded;
  p.max_padded = geo.max_padded;
  p.rotating_slots = geo.rotating_slots;
  p.state_bytes_per_param = geo.state_bytes_per_param();
  return p;
}

// The simulated step's ledger, after the closed form has checked the input and that its sizes fit in 64 bits.
MemPlan plan_memory(const MemPlanInput& in) {
  MemPlan p = memory_from_geometry(in);
  if (in.sampling) return p;  // sampling runs no training step: the key/value cache's closed form stands
  sim::SimRun run;  // (which checks the closed form again first: microseconds)
  run.run = in;
  const sim::SimResult r = sim::simulate_step(run);
  p.peak = r.peak;
  p.device_peak = r.device_peak;
  p.host_peak = r.host_peak;
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

// The device peak grows with the depth (every term does, and C = 64L), so the deepest member that fits is
// found by bisection: about 20 plans instead of up to 1024.
ModelFit largest_model_that_fits(int64_t budget_bytes, const MemPlanInput& shape) {
  const bool every = shape.recompute.mode == RecomputePolicy::Mode::every;
  const int first = std::max(2, every ? shape.recompute.every_k : 2);
  GPT_CHECK(first <= kMaxFamilyDepth, "--recompute every:", shape.recompute.every_k, " exceeds the family's ",
            kMaxFamilyDepth, " layers");
  auto fit_at = [&](int L) {
    ModelFit f;
    f.depth = L;
    MemPlanInput in = shape;
    f.cfg = in.cfg = depth_family_config(L, shape.cfg);
    in.cudnn_workspace.reset();  // measured (if at all) for shape's model, not this one
    f.plan = plan_memory(in);
    return f;
  };
  ModelFit best = fit_at(first);  // an invalid input is reported as such, not as a budget problem
  GPT_CHECK(best.plan.device_peak <= budget_bytes, "--budget ", format_bytes(budget_bytes), " (", budget_bytes,
            " bytes): even the smallest model (d", first, ": L=", first, " NH=", first, " C=", 64 * first, ", ",
            best.plan.psi, " params) needs ", format_bytes(best.plan.device_peak), " (", best.plan.device_peak,
            " bytes) of device memory per rank with these settings");
  int lo = first, hi = kMaxFamilyDepth + 1;  // lo fits; hi does not (or is past the family)
  while (hi - lo > 1) {
    const int mid = lo + (hi - lo) / 2;
    try {
      ModelFit f = fit_at(mid);
      if (f.plan.device_peak <= budget_bytes) {
        lo = mid;
        best = f;
        continue;
      }
    } catch (const Error&) {  // past 2^63 bytes: certainly past the budget
    }
    hi = mid;
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
