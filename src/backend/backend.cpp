// Ledger-tracked allocation shared by every backend, and the backend factory.
#include "src/backend/backend.h"

#include <cstring>

#include "src/core/check.h"
#ifdef GPT_WITH_CUDA
#include "src/backend/cuda/cuda_device.h"
#endif

namespace gpt {

void* Backend::alloc(size_t bytes, MemCat cat) {
  if (bytes == 0) return nullptr;
  void* p = raw_alloc(bytes);
  GPT_CHECK(p, name(), ": out of memory allocating ", bytes, " bytes for ", memcat_name(cat), " (",
            ledger_.current_total(MemDomain::device), " device bytes already held; gpt memplan shows what a run needs)");
  ledger_.on_alloc(p, bytes, cat, MemDomain::device);
  return p;
}

void* Backend::alloc_host(size_t bytes, MemCat cat) {
  if (bytes == 0) return nullptr;
  void* p = raw_alloc_host(bytes);
  GPT_CHECK(p, name(), ": out of host memory allocating ", bytes, " bytes for ", memcat_name(cat), " (",
            ledger_.current_total(MemDomain::host), " host bytes already held; gpt memplan shows what a run needs)");
  ledger_.on_alloc(p, bytes, cat, MemDomain::host);
  return p;
}

void Backend::free(void* p) {
  if (!p) return;
  ledger_.on_free(p);
  raw_free(p);
}

void Backend::free_host(void* p) {
  if (!p) return;
  ledger_.on_free(p);
  raw_free_host(p);
}

std::unique_ptr<Backend> Backend::host_side() { return make_host_backend(*this); }

void Backend::host_write(void* dst, const void* src, size_t bytes) { std::memcpy(dst, src, bytes); }

uint64_t Backend::copy_h2d_async(void* dst, const void* src, size_t bytes) {
  copy_h2d(dst, src, bytes);
  return 0;
}

uint64_t Backend::copy_d2h_async(void* dst, const void* src, size_t bytes) {
  copy_d2h(dst, src, bytes);
  return 0;
}

double Backend::sum_squares_all(const float* const* xs, const size_t* ns, int count) {
  double total = 0.0;
  for (int i = 0; i < count; i++) total += sum_squares(xs[i], ns[i]);
  return total;
}

void Backend::set_attention_path(AttentionPath path, bool automatic) {
  GPT_CHECK(path == AttentionPath::simple, "--attention ", attention_path_name(path), ": the ", name(),
            " backend has only the simple path (use --device cuda)");
}

std::unique_ptr<Backend> make_cpu_backend();

bool cuda_available() {
#ifdef GPT_WITH_CUDA
  return cuda_device_visible();
#else
  return false;
#endif
}

AttentionTarget planning_attention_target() {
#ifdef GPT_WITH_CUDA
  if (cuda_device_visible()) return cuda_device_attention_target(0);
#endif
  AttentionTarget t;
  t.cuda = true;
  t.cudnn.cc_major = 9;
#ifdef GPT_WITH_CUDA
  t.cudnn.version = cuda_cudnn_compiled_version();
  t.cudnn.built = t.cudnn.version > 0;
#endif
  return t;
}

std::optional<cuda::CudnnPlanWorkspace> measured_cudnn_plan_workspace(int B, int T, int C, int NH) {
#ifdef GPT_WITH_CUDA
  if (cuda_device_visible()) return cuda_cudnn_plan_workspace(0, B, T, C, NH);
#endif
  (void)B, (void)T, (void)C, (void)NH;
  return std::nullopt;
}

DeviceKind parse_device_kind(const std::string& device) {
  if (device == "cpu") return DeviceKind::cpu;
  if (device == "cuda") return DeviceKind::cuda;
  fail("--device: expected cpu or cuda, got '", device, "'");
}

std::unique_ptr<Backend> make_backend(DeviceKind kind, int local_rank) {
  GPT_CHECK(local_rank >= 0, "make_backend: local rank ", local_rank, " must be >= 0");
  if (kind == DeviceKind::cpu) return make_cpu_backend();
#ifdef GPT_WITH_CUDA
  GPT_CHECK(cuda_device_visible(), "--device cuda: no CUDA GPU is visible (use --device cpu)");
  return make_cuda_backend(local_rank);
#else
  fail("--device cuda: this build has no CUDA backend (rebuild with nvcc available, -DGPT_CUDA=ON)");
#endif
}

std::unique_ptr<Backend> make_backend(const std::string& device) { return make_backend(parse_device_kind(device), 0); }

}  // namespace gpt
