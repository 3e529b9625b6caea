// Bookkeeping for MemoryLedger (see ledger.h). Thread-safe because host offload copies and the
// optimizer may allocate from worker threads.
#include "src/backend/ledger.h"

#include "src/core/check.h"

namespace gpt {

const char* memcat_name(MemCat c) {
  static const char* names[] = {"param_shard",   "grad_shard", "optim_state", "gathered_param",
                                "gathered_grad", "activation", "workspace",   "host_offload"};
  return names[static_cast<int>(c)];
}

const char* memdomain_name(MemDomain d) { return d == MemDomain::device ? "device" : "host"; }

void MemoryLedger::on_alloc(const void* p, size_t bytes, MemCat cat, MemDomain dom) {
  if (!p) return;
  std::lock_guard<std::mutex> lock(mu_);
  if (spare_.empty()) {
    live_[p] = Entry{bytes, cat, dom};
  } else {
    auto node = std::move(spare_.back());
    spare_.pop_back();
    node.key() = p;
    node.mapped() = Entry{bytes, cat, dom};
    auto r = live_.insert(std::move(node));
    if (!r.inserted) r.position->second = Entry{bytes, cat, dom};
  }
  int d = idx(dom), c = idx(cat);
  cur_[d][c] += bytes;
  total_[d] += bytes;
  if (cur_[d][c] > peak_cat_[d][c]) peak_cat_[d][c] = cur_[d][c];
  if (total_[d] > peak_total_[d]) {
    peak_total_[d] = total_[d];
    at_peak_[d] = cur_[d];
  }
}

void MemoryLedger::on_free(const void* p) {
  if (!p) return;
  std::lock_guard<std::mutex> lock(mu_);
  auto it = live_.find(p);
  GPT_CHECK(it != live_.end(), "memory ledger: free of a pointer that was never allocated");
  int d = idx(it->second.dom), c = idx(it->second.cat);
  cur_[d][c] -= it->second.bytes;
  total_[d] -= it->second.bytes;
  spare_.push_back(live_.extract(it));
}

void MemoryLedger::reset_peaks() {
  std::lock_guard<std::mutex> lock(mu_);
  peak_cat_ = cur_;
  peak_total_ = total_;
  at_peak_ = cur_;
}

std::string MemoryLedger::summary() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::string out;
  for (int d = 0; d < kMemDomains; d++) {
    for (int c = 0; c < kMemCats; c++) {
      if (peak_cat_[d][c] == 0) continue;
      out += str(memdomain_name(static_cast<MemDomain>(d)), "/", memcat_name(static_cast<MemCat>(c)), ": ",
                 cur_[d][c] / 1048576.0, " MiB (peak ", peak_cat_[d][c] / 1048576.0, " MiB)\n");
    }
  }
  return out;
}

}  // namespace gpt
