// See cold_copies.h.
#include "src/cli/cold_copies.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>

namespace gpt {

size_t cache_size_bytes(const std::string& text) {
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (end == text.c_str() || !(v > 0)) return 0;
  const std::string unit = end;
  const double scale = unit == "" ? 1.0 : unit == "K" ? 1024.0 : unit == "M" ? 1048576.0 : unit == "G" ? 1073741824.0 : 0;
  return (size_t)(v * scale);
}

size_t last_level_cache_bytes() {
  size_t best = 0;
  int best_level = 0;
  for (int i = 0; i < 8; i++) {
    const std::string dir = "/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(i) + "/";
    std::ifstream lf(dir + "level"), tf(dir + "type"), sf(dir + "size");
    int level = 0;
    std::string type, size;
    if (!(lf >> level) || !(tf >> type) || !(sf >> size) || type == "Instruction" || level < best_level) continue;
    if (const size_t bytes = cache_size_bytes(size)) best = bytes, best_level = level;
  }
  if (best > 0) return best;
  long llc = sysconf(_SC_LEVEL3_CACHE_SIZE);
  if (llc <= 0) llc = sysconf(_SC_LEVEL2_CACHE_SIZE);
  return llc > 0 ? (size_t)llc : 0;
}

int cold_copies(size_t weight_bytes) {
  static const size_t llc = last_level_cache_bytes();
  const double span = llc > 0 ? 2.0 * (double)llc : 64.0 * (1 << 20);
  return (int)std::clamp(std::ceil(span / (double)std::max<size_t>(weight_bytes, 1)), 1.0, 64.0);
}

ColdCopies cold_buffers(int copies, size_t n, float v) {
  static std::vector<std::shared_ptr<std::vector<float>>> slabs;  // each (at least copies * n) of its point
  const size_t need = (size_t)copies * n;
  auto free_slab = [](const std::shared_ptr<std::vector<float>>& s) { return s.use_count() == 1; };
  std::shared_ptr<std::vector<float>> pick;
  for (const auto& s : slabs)
    if (free_slab(s) && s->size() >= need && (!pick || s->size() < pick->size())) pick = s;
  if (!pick) {
    slabs.erase(std::remove_if(slabs.begin(), slabs.end(), free_slab), slabs.end());
    pick = std::make_shared<std::vector<float>>(need + need / 2);
    slabs.push_back(pick);
  }
  std::fill(pick->begin(), pick->begin() + (ptrdiff_t)need, v);
  return {pick, n, copies};
}

}  // namespace gpt
