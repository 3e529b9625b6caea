// See runtime.h.
#include "src/runtime/runtime.h"

#include <cstdio>

#include "src/core/check.h"
#include "src/dist/collective_check.h"
#include "src/runtime/peak_cache.h"
#ifdef GPT_WITH_NCCL
#include "src/dist/comm_nccl.h"
#endif

namespace gpt {

DeviceKind resolve_device(const std::string& device) {
  if (device == "auto") return cuda_available() ? DeviceKind::cuda : DeviceKind::cpu;
  GPT_CHECK(device == "cpu" || device == "cuda", "--device: expected cpu, cuda or auto, got '", device, "'");
  return parse_device_kind(device);
}

namespace {

// GPU ranks that train together need a device communicator; CPU ranks and a lone rank use the world.
std::unique_ptr<Communicator> make_device_communicator(Communicator& world, Backend& backend) {
  if (backend.kind() != DeviceKind::cuda || world.world() == 1) return nullptr;
#ifdef GPT_WITH_NCCL
  return make_nccl_communicator(world, backend);  // bootstrapped through the MPI world
#else
  fail("--device cuda with ", world.world(), " ranks needs NCCL: rebuild with NCCL and MPI available");
#endif
}

}  // namespace

AttentionPath apply_attention(Backend& backend, const std::string& attention, int C, int NH) {
  AttentionPath path = resolve_attention_path(attention, backend.attention_target(), C, NH);
  const bool automatic = attention == "auto";
  try {
    backend.set_attention_path(path, automatic);
  } catch (const Error& e) {  // cuDNN could not start (cudnnCreate): auto takes the next path
    if (!automatic || path != AttentionPath::cudnn) throw;
    path = attention_fallback_without_cudnn(C, NH);
    std::fprintf(stderr, "warning: --attention auto: %s; using --attention %s\n", e.what(), attention_path_name(path));
    backend.set_attention_path(path, automatic);
  }
  return path;
}

Runtime make_runtime(Communicator& world, const std::string& device, const std::string& attention, int C, int NH) {
  check_attention_flag(attention);
  Runtime rt;
  collective_check(world, "backend", [&] {
    rt.backend = make_backend(resolve_device(device), world.local_rank());
    apply_attention(*rt.backend, attention, C, NH);
  });
  rt.device_comm = make_device_communicator(world, *rt.backend);
  rt.engine_comm = rt.device_comm ? rt.device_comm.get() : &world;
  return rt;
}

PeakFlops mfu_peak(const Backend& backend, double peak_tflops) {
  if (peak_tflops > 0) return {peak_tflops * 1e12, "--peak-tflops"};
  if (backend.kind() == DeviceKind::cpu) {
    const std::string file = peak_cache_file();
    if (const std::optional<CachedPeak> e = read_cached_peak(file, this_cpu_peak_key())) return cached_peak_flops(*e, file);
  }
  return backend.device_info().peak_flops();
}

MfuMeter make_mfu_meter(Backend& backend, double peak_tflops, MfuMeter::Report report) {
  MfuMeter::Remeasure again;
  if (!(peak_tflops > 0)) again = [&backend] { return backend.device_info().remeasure_peak_flops(); };
  return MfuMeter(mfu_peak(backend, peak_tflops), std::move(again), std::move(report));
}

}  // namespace gpt
