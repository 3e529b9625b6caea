// What sampling keeps between tokens: every layer's keys and values of the positions run so far, so that
// each new token costs one row through the model (GPT::forward_cached) instead of a forward over the whole
// window. Also the scratch of one call, sized for the longest (a prompt of `capacity` tokens), and one
// sequence only: sampling draws one. All of it is tagged `activation` in the memory ledger, and
// kv_cache_bytes is its size, which `gpt sample`'s memory plan counts (MemPlanInput::sampling).
#pragma once
#include <cstdint>
#include <vector>

#include "src/backend/backend.h"
#include "src/model/config.h"

namespace gpt {

// The bytes a KvCache of `capacity` positions allocates (cs = the compute dtype's size) on a rank of a
// tensor-parallel group of tp (its heads' keys and values, its share of the products).
int64_t kv_cache_bytes(const GPTConfig& cfg, int capacity, int64_t cs, int tp = 1);

class KvCache {
 public:
  // capacity: the most positions it holds, 1..max_seq_len; tp: the tensor-parallel group's size (Cl = C/tp and
  // NHl = NH/tp below; 1 without).
  KvCache(Backend& be, const GPTConfig& cfg, int capacity, int tp = 1);
  ~KvCache();
  KvCache(const KvCache&) = delete;
  KvCache& operator=(const KvCache&) = delete;

  int capacity() const { return capacity_; }
  int length() const { return length_; }  // positions 0..length-1 hold keys and values
  void reset() { length_ = 0; }           // the next call starts again at position 0
  void advance(int n) { length_ += n; }   // GPT::forward_cached, after appending n positions

  std::vector<void*> k, v;  // [layer] (NHl, capacity, hs) keys and values, compute dtype
  // Scratch of one call of n <= capacity rows (compute dtype unless fp32 is named):
  void* x = nullptr;          // (n, C)   the residual stream: embeddings in, each block's output back
  void* res2 = nullptr;       // (n, C)   the stream after attention
  void* ln = nullptr;         // (n, C)   ln1, ln2 and lnf outputs in turn
  void* qkv = nullptr;        // (n, 3Cl)
  void* atty = nullptr;       // (n, Cl)  attention output before its projection
  void* proj = nullptr;       // (n, C)   a projection's output before its residual add (a rank's share with tp)
  void* fch = nullptr;        // (n, 4Cl) fc pre-activation
  void* fch_gelu = nullptr;   // (n, 4Cl)
  float* mean = nullptr;      // (n) fp32 layernorm statistics
  float* rstd = nullptr;      // (n) fp32
  int* tokens = nullptr;      // (n) token ids on the device
  void* logits = nullptr;     // (Vp) the last position's logits
  float* logits_f32 = nullptr;  // (Vp) fp32: the same widened, for the host (generate)
  void* logits_slice = nullptr;  // (Vp / tp) tensor parallelism: this rank's vocabulary slice, then gathered

 private:
  void* take(size_t bytes);
  void allocate(const GPTConfig& cfg);
  Backend& be_;
  int capacity_ = 0, length_ = 0, tp_ = 1;
  std::vector<void*> owned_;
};

}  // namespace gpt
