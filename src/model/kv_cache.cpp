// See kv_cache.h. The byte count and the constructor list the same buffers, so kv_cache_bytes is what the
// ledger records.
#include "src/model/kv_cache.h"

#include "src/core/check.h"
#include "src/core/size_math.h"

namespace gpt {

int64_t kv_cache_bytes(const GPTConfig& c, int capacity, int64_t cs) {
  const int64_t n = capacity, C = c.channels;
  const int64_t cache = sat_mul({2, c.num_layers, n, C, cs});
  const int64_t scratch = sat_mul({n, 16 * C, cs});  // x, res2, ln, qkv (3C), atty, proj, fch (4C), fch_gelu (4C)
  const int64_t rows = sat_mul({3, n, 4});            // mean, rstd, tokens
  const int64_t logits = sat_add({sat_mul({c.padded_vocab_size, cs}), sat_mul({c.padded_vocab_size, 4})});
  return sat_add({cache, scratch, rows, logits});
}

KvCache::KvCache(Backend& be, const GPTConfig& c, int capacity) : be_(be), capacity_(capacity) {
  GPT_CHECK(capacity >= 1 && capacity <= c.max_seq_len, "key/value cache: ", capacity,
            " positions, expected 1..", c.max_seq_len, " (the model's sequence length)");
  try {
    allocate(c);
  } catch (...) {
    for (void* p : owned_) be_.free(p);
    throw;
  }
}

void KvCache::allocate(const GPTConfig& c) {
  const size_t n = (size_t)capacity_, C = (size_t)c.channels, cs = be_.compute_size();
  for (int l = 0; l < c.num_layers; l++) {
    k.push_back(take(n * C * cs));
    v.push_back(take(n * C * cs));
  }
  x = take(n * C * cs);
  res2 = take(n * C * cs);
  ln = take(n * C * cs);
  qkv = take(n * 3 * C * cs);
  atty = take(n * C * cs);
  proj = take(n * C * cs);
  fch = take(n * 4 * C * cs);
  fch_gelu = take(n * 4 * C * cs);
  mean = static_cast<float*>(take(n * sizeof(float)));
  rstd = static_cast<float*>(take(n * sizeof(float)));
  tokens = static_cast<int*>(take(n * sizeof(int)));
  logits = take((size_t)c.padded_vocab_size * cs);
  logits_f32 = static_cast<float*>(take((size_t)c.padded_vocab_size * sizeof(float)));
}

KvCache::~KvCache() {
  for (void* p : owned_) be_.free(p);
}

void* KvCache::take(size_t bytes) {
  owned_.push_back(nullptr);  // room first: a push_back that throws must not lose the allocation
  owned_.back() = be_.alloc(bytes, MemCat::activation);
  return owned_.back();
}

}  // namespace gpt
