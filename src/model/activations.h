// Activation storage for one micro-batch shape (B, T). Each block's buffers are either kept per layer or
// point into one shared scratch set, as the recompute policy decides; the residual stream (every block's
// input and the final output) is always kept. All buffers are tagged `activation` in the memory ledger.
#pragma once
#include <vector>

#include "src/backend/backend.h"
#include "src/model/config.h"
#include "src/model/recompute.h"

namespace gpt {

// One block's activations (N = B*T rows). A pointer may be shared scratch (recomputed in backward).
struct BlockActs {
  void* ln1 = nullptr;        // (N, C)
  float* ln1_mean = nullptr;  // (N)
  float* ln1_rstd = nullptr;  // (N)
  void* qkv = nullptr;        // (N, 3C)
  void* atty = nullptr;       // (N, C)   attention output before the projection
  void* att_state = nullptr;  // backend-defined, attention_state_bytes(B, T, NH)
  void* res2 = nullptr;       // (N, C)   residual after attention
  void* ln2 = nullptr;        // (N, C)
  float* ln2_mean = nullptr;  // (N)
  float* ln2_rstd = nullptr;  // (N)
  void* fch = nullptr;        // (N, 4C)  fc pre-activation
  void* fch_gelu = nullptr;   // (N, 4C)
};

// Which BlockActs fields a layer keeps (false = shared scratch, recomputed in backward).
struct KeptFields {
  bool ln1 = true, ln1_stats = true, qkv = true, atty = true, att_state = true, res2 = true;
  bool ln2 = true, ln2_stats = true, fch = true, fch_gelu = true;
  bool all() const {
    return ln1 && ln1_stats && qkv && atty && att_state && res2 && ln2 && ln2_stats && fch && fch_gelu;
  }
  static KeptFields for_layer(const RecomputePolicy& p, int layer);
};

class Activations {
 public:
  Activations(Backend& be, const GPTConfig& cfg, const RecomputePolicy& policy, int B, int T);
  ~Activations();
  Activations(const Activations&) = delete;
  Activations& operator=(const Activations&) = delete;

  int B, T;
  std::vector<void*> resid;       // L+1 buffers (N, C): resid[l] is block l's input, resid[L] the last output
  std::vector<BlockActs> blocks;  // L
  std::vector<KeptFields> kept;   // L
  void* lnf = nullptr;            // (N, C)
  float* lnf_mean = nullptr;      // (N)
  float* lnf_rstd = nullptr;      // (N)
  void* logits = nullptr;         // (N, Vp)  overwritten by dlogits in backward
  float* losses = nullptr;        // (N)
  int* inputs = nullptr;          // (N) token ids on the device
  int* targets = nullptr;         // (N)
  // Backward scratch (activation gradients).
  void* dres = nullptr;           // (N, C)  gradient of the residual stream
  void* dwide_a = nullptr;        // (N, 4C)
  void* dwide_b = nullptr;        // (N, 4C)
  void* dnarrow_a = nullptr;      // (N, C)
  void* dnarrow_b = nullptr;      // (N, C)

 private:
  Backend& be_;
  std::vector<void*> owned_;
  void* take(size_t bytes);
};

}  // namespace gpt
