// See plan_auto.h.
#include "src/cli/plan_auto.h"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <filesystem>

#include "kernels/cpu/ops.h"
#include "src/backend/backend.h"
#include "src/cli/attention_plan.h"
#include "src/cli/calibrate.h"
#include "src/cli/plan_flags.h"
#include "src/cli/plan_report.h"
#include "src/core/check.h"
#include "src/dist/collective_check.h"
#include "src/runtime/peak_cache.h"
#include "src/runtime/runtime.h"
#include "src/util/host_memory.h"
#include "src/util/log.h"
#include "src/util/paths.h"

namespace gpt {
namespace {

std::string upper(std::string s) {
  for (char& ch : s) ch = (char)std::toupper((unsigned char)ch);
  return s;
}

// The datasheet file of the GPU this rank would run on, by its name.
std::string gpu_datasheet(Communicator& world, const std::string& data_dir) {
  return gpu_datasheet_for(make_backend(DeviceKind::cuda, world.local_rank())->name(), data_dir);
}

bool is_this_machine(const HardwareSpec& h) {
  return h.kind == "cpu" && h.cores == (int)sysconf(_SC_NPROCESSORS_ONLN) && h.name.find(cpu_model_name()) != std::string::npos;
}

// This machine's calibration for `world`'s ranks, from the cache, made (collectively) when it does not serve
// them (calibration_serves).
std::string cpu_calibration(Communicator& world) {
  const std::string peak = peak_cache_file();
  GPT_CHECK(!peak.empty(), "--plan auto: no cache folder ($GPT_CACHE_DIR, $XDG_CACHE_HOME and $HOME are unset); give "
            "--hardware FILE (gpt bench --calibrate --out FILE)");
  const std::string file = (std::filesystem::path(peak).parent_path() / "cpu_hardware.json").string();
  int ready = 0;  // rank 0 decides: 1 = the cache serves this run
  collective_check(world, "--plan auto calibration cache", [&] {
    if (world.rank() != 0) return;
    if (!std::filesystem::exists(file)) return;
    const HardwareSpec h = load_hardware(file);  // a corrupt cache is an error naming it
    if (!is_this_machine(h)) {
      std::filesystem::remove(file);  // another machine's: measured afresh below
      return;
    }
    ready = calibration_serves(h, world.world(), cpu::max_threads()) ? 1 : 0;
  });
  ready = (int)world.all_reduce_max((double)ready);
  if (!ready) {
    log_rank0(world, "--plan auto: calibrating this machine at ", world.world(), " rank(s), once (cached in ", file,
              "; delete it to measure again)");
    run_calibration(world, file, false, false);
  }
  return file;
}

}  // namespace

std::string gpu_datasheet_for(const std::string& gpu_name, const std::string& data_dir) {
  const std::string name = upper(gpu_name);
  // The H100 file is the SXM part's: a PCIe or NVL H100 (fewer SMs, other clocks and memory) is not priced by it.
  const bool h100_other = name.find("H100") != std::string::npos &&
                          (name.find("PCIE") != std::string::npos || name.find("NVL") != std::string::npos);
  const std::pair<const char*, const char*> table[] = {
      {"H200", "h200.json"}, {"H100", "h100.json"}, {"A100-SXM4-80GB", "a100_80gb.json"},
      {"A100 80GB", "a100_80gb.json"}, {"A100", "a100_40gb.json"}, {"V100", "v100_dgx2.json"}};
  for (const auto& [part, file] : table)
    if (!h100_other && name.find(part) != std::string::npos) return data_dir + "/hardware/" + file;
  fail("no datasheet in ", data_dir, "/hardware for this GPU (", gpu_name, "); give --hardware FILE");
}

std::string this_machine_hardware(Communicator& world, DeviceKind device, const std::string& data_dir) {
  if (device != DeviceKind::cuda) return cpu_calibration(world);
  std::string file;
  collective_check(world, "--hardware this", [&] { file = gpu_datasheet(world, data_dir); });
  return file;
}

std::string hardware_flag_file(const std::string& flag, Communicator& world, DeviceKind device, int plan_world,
                               int& threads) {
  if (flag != "this") return flag;
  GPT_CHECK(device == DeviceKind::cuda || (plan_world == world.world() && (threads == 0 || threads == cpu::max_threads())),
            "--hardware this: on the cpu it is this launch's calibration (", world.world(), " rank(s) x ",
            cpu::max_threads(), " thread(s)); plan for those, or give --hardware FILE (gpt bench --calibrate --out FILE)");
  if (device != DeviceKind::cuda) threads = cpu::max_threads();
  return this_machine_hardware(world, device, default_data_dir());
}

bool calibration_serves(const HardwareSpec& h, int ranks, int threads) {
  bool compute = false, network = ranks == 1;
  for (const ComputeProfile& p : h.profiles)
    compute = compute || (p.ranks == ranks && p.threads == threads && p.has_gemm_edge);
  for (const MeasuredNetwork& m : h.measured) network = network || m.ranks == ranks;
  return compute && network;
}

bool plan_auto_requested(Flags& f) {
  const std::string p = f.str("--plan", "");
  GPT_CHECK(p.empty() || p == "auto", "--plan: expected auto, got '", p, "'");
  const std::string hw = f.str("--hardware", "");
  GPT_CHECK(p == "auto" || hw.empty(), "--hardware is read only with --plan auto");
  return p == "auto";
}

void apply_plan_auto(Flags& f, TrainOptions& o, Communicator& world) {
  GPT_CHECK(o.fsdp.engine == EngineKind::full, "--engine naive: --plan auto plans the full engine's levers; drop one");
  const DeviceKind dev = resolve_device(o.device);
  std::string hw_path = f.str("--hardware", "");
  PlanRequest rq;
  rq.pins = parse_plan_pins(f);
  if (hw_path.empty()) hw_path = this_machine_hardware(world, dev, o.data_dir);
  HardwareSpec hw;
  PlanResult r;
  collective_check(world, "--plan auto", [&] {
    hw = load_hardware(hw_path);
    GPT_CHECK((hw.kind == "gpu") == (dev == DeviceKind::cuda), "--plan auto: --hardware ", hw_path, " describes a ",
              hw.kind, " but this run is on ", device_kind_name(dev));
    rq.hw = &hw;
    check_tp_run(TpOptions{o.tp.size, false}, o.model, world.world(), 1, o.T, "the world size");  // a pinned --tp
    rq.base.cfg = o.model;
    rq.base.world = world.world();
    rq.base.T = o.T;
    rq.base.compute = dev == DeviceKind::cuda ? DType::BF16 : DType::F32;
    resolve_planned_attention(rq.base, o.attention, dev, false);
    // the default: -B sequences on each data-parallel rank of the given mesh (--tp, else every rank)
    rq.total_batch = o.total_batch > 0 ? o.total_batch : (int64_t)o.B * o.T * (world.world() / o.tp.size);
    rq.ranks_per_node = world.local_size();
    rq.threads_per_rank = dev == DeviceKind::cpu ? cpu::max_threads() : 0;
    rq.budget = parse_plan_budget("", hw, world.local_size());
    if (!rq.budget.one_ram) {  // the pinned buffers of offload come out of this node's host memory
      const HostMemory h = host_memory_available();
      rq.budget.host = h.available == INT64_MAX ? -1 : h.available / std::max(1, world.local_size());
    }
    rq.top = 1;
    r = search_plans(rq);
  });
  const PlanChoice& c = r.top[0].choice;
  o.tp = c.tp;
  o.fsdp.strategy = c.strategy;
  o.fsdp.shard_group = c.strategy == ShardStrategy::hybrid ? c.shard_group : 0;
  o.fsdp.gather_slots = c.gather_slots;
  o.fsdp.no_sync = c.no_sync;
  o.fsdp.offload = c.offload.states;
  o.fsdp.reduce_dtype = c.reduce;
  o.offload_activations = c.offload.activations;
  o.recompute = c.recompute;
  o.wrap = c.wrap;
  o.B = c.B;
  o.total_batch = rq.total_batch;
  log_rank0(world, plan_auto_line(rq, r));
}

}  // namespace gpt
