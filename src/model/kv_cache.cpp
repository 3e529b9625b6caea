// See kv_cache.h. The byte count and the constructor list the same buffers, so kv_cache_bytes is what the
// ledger records.
#include "src/model/kv_cache.h"

#include "src/core/check.h"
#include "src/core/size_math.h"

namespace gpt {

int64_t kv_cache_bytes(const GPTConfig& c, int capacity, int64_t cs, int tp) {
  const int64_t n = capacity, C = c.channels, Cl = C / tp;
  const int64_t cache = sat_mul({2, c.num_layers, n, Cl, cs});
  // x, res2, ln, proj (C each), qkv (3Cl), atty (Cl), fch and fch_gelu (4Cl each)
  const int64_t scratch = sat_mul({n, 4 * C + 12 * Cl, cs});
  const int64_t rows = sat_mul({3, n, 4});  // mean, rstd, tokens
  const int64_t logits = sat_add({sat_mul({c.padded_vocab_size, cs}), sat_mul({c.padded_vocab_size, 4})});
  const int64_t slice = tp > 1 ? sat_mul({c.padded_vocab_size / tp, cs}) : 0;  // this rank's logits
  return sat_add({cache, scratch, rows, logits, slice});
}

KvCache::KvCache(Backend& be, const GPTConfig& c, int capacity, int tp) : be_(be), capacity_(capacity), tp_(tp) {
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
  const size_t n = (size_t)capacity_, C = (size_t)c.channels, Cl = C / (size_t)tp_, cs = be_.compute_size();
  for (int l = 0; l < c.num_layers; l++) {
    k.push_back(take(n * Cl * cs));
    v.push_back(take(n * Cl * cs));
  }
  x = take(n * C * cs);
  res2 = take(n * C * cs);
  ln = take(n * C * cs);
  qkv = take(n * 3 * Cl * cs);
  atty = take(n * Cl * cs);
  proj = take(n * C * cs);
  fch = take(n * 4 * Cl * cs);
  fch_gelu = take(n * 4 * Cl * cs);
  mean = static_cast<float*>(take(n * sizeof(float)));
  rstd = static_cast<float*>(take(n * sizeof(float)));
  tokens = static_cast<int*>(take(n * sizeof(int)));
  logits = take((size_t)c.padded_vocab_size * cs);
  logits_f32 = static_cast<float*>(take((size_t)c.padded_vocab_size * sizeof(float)));
  if (tp_ > 1) logits_slice = take((size_t)(c.padded_vocab_size / tp_) * cs);
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
