// See runtime.h.
#include "src/runtime/runtime.h"

#include "src/core/check.h"
#include "src/dist/collective_check.h"
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

Runtime make_runtime(Communicator& world, const std::string& device, const std::string& attention) {
  GPT_CHECK(attention == "simple" || attention == "fused", "--attention: expected simple or fused, got '", attention,
            "'");
  Runtime rt;
  collective_check(world, "backend", [&] {
    rt.backend = make_backend(resolve_device(device), world.local_rank());
    rt.backend->set_fused_attention(attention == "fused");
  });
  rt.device_comm = make_device_communicator(world, *rt.backend);
  rt.engine_comm = rt.device_comm ? rt.device_comm.get() : &world;
  return rt;
}

PeakFlops mfu_peak(const Backend& backend, double peak_tflops) {
  if (peak_tflops > 0) return {peak_tflops * 1e12, "--peak-tflops"};
  return backend.peak_flops();
}

}  // namespace gpt
