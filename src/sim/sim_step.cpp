// See sim_step.h.
#include "src/sim/sim_step.h"

#include <algorithm>
#include <memory>
#include <optional>
#include <vector>

#include "src/core/check.h"
#include "src/dist/mesh.h"
#include "src/fsdp/geometry.h"
#include "src/fsdp/make_engine.h"
#include "src/model/gpt.h"
#include "src/plan/collectives.h"
#include "src/plan/rank_rates.h"
#include "src/sim/observed_params.h"
#include "src/sim/sim_backend.h"
#include "src/sim/sim_comm.h"
#include "src/train/train_step.h"
#include "src/util/trace.h"

namespace gpt::sim {

namespace {

// The rates and links of the hardware file for this run, when there is one.
struct Pricing {
  std::optional<RankRates> rates;
  std::unique_ptr<NetworkModel> net;
  bool overlap = true;
};

Pricing price_on(const SimRun& r, int R, SimResult& out) {
  Pricing p;
  if (!r.hw) return p;
  const HardwareSpec& hw = *r.hw;
  const bool cpu_run = r.run.compute == DType::F32;
  GPT_CHECK(hw.dtype == r.run.compute, "--hardware ", hw.file, ": its rates are for ",
            hw.dtype == DType::F32 ? "fp32 (the cpu backend)" : "bf16 (the cuda backend)", ", the run computes in ",
            cpu_run ? "fp32 (--device cpu)" : "bf16 (--device cuda)", ": use a matching hardware file");
  const int threads = r.threads_per_rank > 0 ? r.threads_per_rank : std::max(1, hw.cores / R);
  p.rates = rates_for(hw, R, threads, &out.profile, &out.notes);
  out.peak_flops = p.rates->peak;
  p.net = std::make_unique<NetworkModel>(hw, R);
  out.network = p.net->describe();
  p.overlap = hw.overlap;
  return p;
}

// The time report's warning when tensor parallelism leaves the node's links: its collectives (4L + 2 per
// micro-step, on the critical path) then cross the inter-node network, which sim_comm.cpp prices.
void note_tp_placement(int T, int R, int world, SimResult& out) {
  if (T <= 1) return;
  if (T > R)
    out.notes.push_back(str("tensor parallelism of T = ", T, " spans nodes of ", R, " ranks: its collectives cross the "
                            "inter-node network and are priced on it, not on the node's links (keep --tp within a "
                            "node: a divisor of ", R, ")"));
  else if (group_straddles_nodes(T, 1, R, world))
    out.notes.push_back(str("tensor-parallel groups of T = ", T, " straddle nodes of ", R, " ranks (", R,
                            " is not a multiple of ", T, "): the groups that cross a node boundary run their "
                            "collectives on the inter-node network, and every group's are priced so"));
}

// The same for hybrid's shard groups (G consecutive data-parallel ranks, T apart), which sim_comm.cpp prices alike.
void note_shard_group_placement(const FsdpOptions& fsdp, int T, int R, int world, SimResult& out) {
  if (fsdp.strategy != ShardStrategy::hybrid) return;
  const int G = EngineGeometry::shard_group_size(fsdp, world / T);
  if (group_straddles_nodes(G, T, R, world))
    out.notes.push_back(str("hybrid shard groups of ", G, " data-parallel ranks", T > 1 ? str(" (", T, " apart)") : "",
                            " straddle nodes of ", R, " ranks: the groups that cross a node boundary run their "
                            "collectives on the inter-node network, and every group's are priced so"));
}

void read_ledger(const MemoryLedger& l, SimResult& out) {
  for (int d = 0; d < kMemDomains; d++)
    for (int c = 0; c < kMemCats; c++) out.peak[d][c] = l.peak((MemDomain)d, (MemCat)c);
  out.device_peak = l.peak_total(MemDomain::device);
  out.host_peak = l.peak_total(MemDomain::host);
}

}  // namespace

SimResult simulate_step(const SimRun& r) {
  // validates the run, and refuses sizes past 2^63 bytes before any is allocated
  if (!r.memory_planned) memory_from_geometry(r.run);
  GPT_CHECK(r.grad_accum >= 1, "gradient accumulation must be >= 1, got ", r.grad_accum);
  GPT_CHECK(!r.run.sampling, "sim: the simulated machine runs a training step, not sampling");
  SimResult out;
  trace::Isolated quiet;  // a run's own --trace never sees the simulated step
  const int N = r.run.world;
  const int R = r.ranks_per_node > 0 ? r.ranks_per_node : r.hw ? std::min(N, r.hw->devices_per_node) : N;
  GPT_CHECK(R >= 1 && R <= N, "ranks per node ", R, " must be in [1, --world ", N, "]");
  out.ranks_per_node = R;
  const Pricing pricing = price_on(r, R, out);
  if (r.hw) {
    note_tp_placement(r.run.tp.size, R, N, out);
    note_shard_group_placement(r.run.fsdp, r.run.tp.size, R, N, out);
  }
  const bool cuda = r.run.compute == DType::BF16;

  Timeline tl(/*async=*/cuda);
  SimDevice dev;
  dev.kind = cuda ? DeviceKind::cuda : DeviceKind::cpu;
  dev.attention = r.run.attention;
  dev.cudnn_workspace = r.run.cudnn_workspace.value_or(cuda::CudnnPlanWorkspace{});
  SimBackend be(dev, tl, pricing.rates ? &*pricing.rates : nullptr);
  // GPU ranks talk through NCCL (one stream, issue order), CPU ranks through MPI.
  std::unique_ptr<Communicator> world = make_sim_world(N, R, tl, pricing.net.get(), pricing.overlap, cuda);

  // As the trainer makes them (Trainer::make_model_and_engine): with tensor parallelism, the mesh's groups.
  const TpOptions& tpo = r.run.tp;
  Mesh mesh;
  std::unique_ptr<TensorParallel> tp;
  if (tpo.size > 1) {
    mesh = make_mesh(*world, tpo.size);
    tp = std::make_unique<TensorParallel>(*mesh.tp, tpo.sequence_parallel, be.compute_dtype());
  }
  GPT model(be, r.run.cfg, r.run.recompute, r.run.wrap, r.run.offload_activations, tp.get());
  std::unique_ptr<ShardingEngine> engine_ptr =
      make_engine(be, mesh.dp ? *mesh.dp : *world, model.layout(), r.run.fsdp);
  ShardingEngine& engine = *engine_ptr;
  model.reserve_workspace(r.run.B, r.run.T);
  ObservedParams params(engine, be, *world);

  TrainStepSpec spec;
  spec.B = r.run.B;
  spec.T = r.run.T;
  spec.accum = r.grad_accum;
  spec.lr = 1e-4f;
  const bool tracing = !r.trace_path.empty();
  struct ClockGuard {  // the simulated clock never outlives this step, whatever is thrown
    ~ClockGuard() { trace::set_clock({}); }
  } clock_guard;
  if (tracing) {
    trace::start(r.trace_path, 0);
    trace::set_clock([&tl] { return tl.now() * 1e6; });
  }
  tl.restart();  // the set-up (allocation, zeroing) is not the step
  engine.begin_traffic_step();
  if (mesh.tp) mesh.tp->ledger().begin_step();
  const double comm0 = sim_comm_seconds(*world), gather0 = sim_gather_seconds(*world);
  const int64_t calls0 = sim_timed_calls(*world);
  try {
    if (r.run.fsdp.inference) {  // eval's pass (Trainer::evaluate): a forward with targets, no gradients
      const std::vector<int> tokens((size_t)r.run.B * r.run.T, 0);
      model.forward(tokens.data(), tokens.data(), r.run.B, r.run.T, params);
    } else {
      run_train_step(model, engine, params, *world, spec, [](int* in, int* tg) {});
    }
  } catch (...) {
    trace::reset();  // (the Isolated guard then restores whatever trace was on before)
    throw;
  }
  if (tracing) {
    trace::set_clock({});
    trace::finish_local();
  }
  read_ledger(be.ledger(), out);
  const CommCounters c = engine.traffic_step();
  out.bytes = c.bytes_sent;
  out.calls = c.calls;
  if (mesh.tp) {
    const CommCounters t = mesh.tp->ledger().step();
    out.tp_bytes = t.bytes_sent;
    out.tp_calls = t.calls;
  }
  out.step_s = tl.host_time();
  out.phases = tl.phases();
  out.comm_s = sim_comm_seconds(*world) - comm0;
  out.gather_s = sim_gather_seconds(*world) - gather0;
  out.timed_calls = sim_timed_calls(*world) - calls0;
  out.longest_stretch_s = tl.longest_stretch();
  out.hardware_flops = be.products_flops();
  out.gathers_ahead = params.gathers_ahead();
  const Layout& layout = model.layout();
  out.units.reserve((size_t)layout.num_units());
  for (int u = 0; u < layout.num_units(); u++) {
    SimUnit su;
    su.name = layout.unit(u).name;
    if (u < (int)be.unit_seconds().size()) {
      const auto& s = be.unit_seconds()[u];
      su.forward = s[0], su.recompute = s[1], su.backward = s[2];
    }
    out.units.push_back(su);
  }
  return out;
}

namespace {
// "all_gather 2.3 MiB (8 calls), reduce_scatter 1.2 MiB (4 calls)" and the total bytes.
std::string kinds_line(const std::array<int64_t, kCollKinds>& bytes, const std::array<int64_t, kCollKinds>& calls,
                       int64_t* total) {
  std::string kinds;
  for (int k = 0; k < kCollKinds; k++) {
    if (calls[k] == 0 || bytes[k] == 0) continue;
    kinds += str(kinds.empty() ? "" : ", ", collkind_name((CollKind)k), " ", bytes[k] / 1048576.0, " MiB (", calls[k],
                 " calls)");
    *total += bytes[k];
  }
  return kinds.empty() ? std::string("none") : kinds;
}
}  // namespace

std::string traffic_line(const SimResult& r, int grad_accum) {
  int64_t total = 0;
  const std::string fsdp = kinds_line(r.bytes, r.calls, &total);
  std::string tp;
  for (int64_t c : r.tp_calls)
    if (c) tp = kinds_line(r.tp_bytes, r.tp_calls, &total);
  return str("traffic per step per rank (", grad_accum, " micro-step", grad_accum > 1 ? "s" : "",
             ", the simulated step's ledger): ", tp.empty() ? "" : "fsdp ", fsdp, tp.empty() ? "" : "; tp " + tp, " = ",
             total / 1048576.0, " MiB");
}

}  // namespace gpt::sim
