// The memory ledger: every byte a backend allocates is tagged with a category and a domain, so the memory
// a rank holds can be read off exactly (and asserted against the ZeRO/FSDP formulas in tests) instead of
// guessed from process RSS. "device" is the accelerator (or, on the CPU backend, the memory the compute
// uses); "host" is where offloaded state lives. On the CPU backend both are RAM but kept apart, so the
// effect of offload is measured there too.
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

namespace gpt {

enum class MemCat : int {
  param_shard,     // fp32 master parameters owned by this rank (1/N of each unit)
  grad_shard,      // fp32 gradient shard owned by this rank
  optim_state,     // Adam m and v for the owned shard
  gathered_param,  // full (unsharded) unit parameters in compute dtype: gather slots, or the compute copy
  gathered_grad,   // full-unit gradient buffers before reduce-scatter
  activation,      // forward activations kept for backward, and activation gradients
  workspace,       // scratch: logits, staging buffers, library workspaces
  host_offload,    // staging between domains (offload copies)
  count
};
enum class MemDomain : int { device, host, count };

const char* memcat_name(MemCat c);
const char* memdomain_name(MemDomain d);

constexpr int kMemCats = static_cast<int>(MemCat::count);
constexpr int kMemDomains = static_cast<int>(MemDomain::count);

// Bytes per category for one domain.
using MemBreakdown = std::array<int64_t, kMemCats>;

class MemoryLedger {
 public:
  MemoryLedger() { live_.reserve(4096); }  // a model's buffers without rehashing (a plan search makes thousands)
  void on_alloc(const void* p, size_t bytes, MemCat cat, MemDomain dom);
  void on_free(const void* p);

  int64_t current(MemDomain d, MemCat c) const { return cur_[idx(d)][idx(c)]; }
  int64_t peak(MemDomain d, MemCat c) const { return peak_cat_[idx(d)][idx(c)]; }
  int64_t current_total(MemDomain d) const { return total_[idx(d)]; }
  int64_t peak_total(MemDomain d) const { return peak_total_[idx(d)]; }
  // Breakdown by category at the moment the domain's total peaked.
  const MemBreakdown& at_peak(MemDomain d) const { return at_peak_[idx(d)]; }
  const MemBreakdown& now(MemDomain d) const { return cur_[idx(d)]; }
  // Forget peaks (keep what is live): peaks then measure from this point, e.g. one training step.
  void reset_peaks();
  // One line per non-empty category, "domain/category: X MiB (peak Y MiB)".
  std::string summary() const;

 private:
  template <typename E>
  static int idx(E e) { return static_cast<int>(e); }
  struct Entry {
    size_t bytes;
    MemCat cat;
    MemDomain dom;
  };
  mutable std::mutex mu_;
  std::unordered_map<const void*, Entry> live_;
  // Nodes of freed entries, taken again by the next allocations: a step allocates and frees its activations
  // and workspaces over and over, and a node allocated and freed with each was an eighth of a plan search.
  std::vector<std::unordered_map<const void*, Entry>::node_type> spare_;
  std::array<MemBreakdown, kMemDomains> cur_{}, peak_cat_{}, at_peak_{};
  std::array<int64_t, kMemDomains> total_{}, peak_total_{};
};

}  // namespace gpt
