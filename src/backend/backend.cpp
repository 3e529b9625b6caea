// Ledger-tracked allocation shared by every backend, and the backend factory.
#include "src/backend/backend.h"

#include "src/core/check.h"

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

uint64_t Backend::copy_h2d_async(void* dst, const void* src, size_t bytes) {
  copy_h2d(dst, src, bytes);
  return 0;
}

uint64_t Backend::copy_d2h_async(void* dst, const void* src, size_t bytes) {
  copy_d2h(dst, src, bytes);
  return 0;
}

void check_fused_attention_backend(const std::string& backend) {
  GPT_CHECK(backend == "cuda", "--attention fused: the ", backend, " backend has only the simple path (use --device cuda)");
}

void Backend::set_fused_attention(bool fused) {
  if (fused) check_fused_attention_backend(name());
}

std::unique_ptr<Backend> make_cpu_backend();
#ifdef GPT_WITH_CUDA
std::unique_ptr<Backend> make_cuda_backend(int local_rank);
bool cuda_device_visible();
#endif

bool cuda_available() {
#ifdef GPT_WITH_CUDA
  return cuda_device_visible();
#else
  return false;
#endif
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
