// The one statement of what each op of a training step costs: FLOPs for the products, bytes for the
// memory-bound ops, derived from the shapes in the order src/model/gpt.cpp calls them (block forward,
// its recompute, block backward, embedding, final layernorm, LM head and classifier) and from the
// engine's own memory work (gradient slot fills, shard adds, AdamW). The time model prices them with a
// hardware file (src/plan/timemodel.h); nothing here knows about time.
//
// Products are rated by M*N*K (a curve in the hardware file); a product's backward (dinp and dw, one
// matmul_backward call) by its own curve when the file has one. On the CPU backend the attention's per-head
// products are single-threaded and run side by side on the threads (OpClass::gemm_tasks). On the CUDA
// backend the simple attention path's batched products are one call each, rated at their total M*N*K;
// the fused path is rated as the products it computes (the causal half of Q K^T and P V forward, and 2.5x
// that backward: Q K^T again, dP, dS^T Q, dS K, P^T dO).
//
// Layernorm, GELU and the classifier also carry their kernel family and element count: a calibrated CPU
// file rates them by elements (their exp work, not their bytes, bounds them there). Bytes are what an op
// reads plus what it writes, at the compute dtype's size for activations and 4 for
// fp32 statistics, gradients and model states. Training runs one classifier pass, in backward (losses and
// dlogits together): on the CPU 5 passes over the logits (max, exp-sum + write, scale + write), on CUDA one
// read and one write. gpt.cpp's fused pairs (residual + ln2, ln backward + residual, fcproj backward + GELU
// backward) are priced as the two ops they replace, in one launch (the CPU twins run the pair row by row).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "src/model/activations.h"
#include "src/model/config.h"

namespace gpt {

enum class OpClass {
  gemm,         // one product: flops at gemm(mnk)
  gemm_backward,  // a product's backward call (dinp and dw): flops at gemm_backward(mnk)
  gemm_tasks,   // many single-threaded products in parallel: flops at gemm_tasks(mnk)
  stream,       // a parallel loop over memory: bytes at stream(bytes)
  copy,         // a copy or fill: bytes at copy(bytes)
  host_stream,  // a loop over host memory (offloaded states): bytes at the host bandwidth
  pcie,         // host <-> device copy: bytes at the PCIe bandwidth
};

struct OpCost {
  std::string name;
  OpClass cls = OpClass::stream;
  double mnk = 0;    // gemm, gemm_tasks: M*N*K of one product (the size the rate is read at)
  double flops = 0;  // gemm, gemm_tasks: all products of the op
  double bytes = 0;  // the memory classes: bytes read + written (copy, pcie: bytes copied)
  std::string kernel;   // stream ops of a kernel family a profile may rate by elements (hardware.h "kernels")
  double elements = 0;  // its elements (layernorm N*C, gelu N*4C, classifier N*V, adamw parameters)
  int launches = 1;  // kernels (or parallel regions) the op starts: each pays the hardware's op overhead
};

// The shapes one micro-step's ops are derived from.
struct OpShape {
  int64_t B = 1, T = 1;        // per-rank micro-batch and sequence length
  int64_t C = 1, NH = 1, L = 1, V = 1, Vp = 1;
  int64_t cs = 4;              // bytes per activation element (4 fp32 on the cpu backend, 2 bf16 on cuda)
  bool cpu = true;             // which backend's kernels (cpu: fp32 OpenBLAS + OpenMP; else cuda)
  // A flash-style attention kernel (--attention fused or cudnn): both are priced as the causal half of the
  // products plus their q/k/v/out io; cuDNN's own kernels may be faster than this says (only a GPU tells).
  bool fused_attention = false;
  static OpShape of(const GPTConfig& cfg, int B, int T, bool cpu, bool fused_attention);
  int64_t N() const { return B * T; }
};

// A block's forward; with `recompute` the re-run of only the fields `kept` does not hold (gpt.cpp's
// only_scratch pass), which never includes the MLP's output projection and residual.
std::vector<OpCost> block_forward_ops(const OpShape& s, const KeptFields* recompute = nullptr);
std::vector<OpCost> block_backward_ops(const OpShape& s);
std::vector<OpCost> embed_forward_ops(const OpShape& s);    // token + position embedding
std::vector<OpCost> embed_backward_ops(const OpShape& s);   // into wte's and wpe's gradients
std::vector<OpCost> head_forward_ops(const OpShape& s);     // final layernorm
std::vector<OpCost> head_backward_ops(const OpShape& s);
std::vector<OpCost> lm_head_forward_ops(const OpShape& s);  // logits = lnf @ wte^T
std::vector<OpCost> lm_head_backward_ops(const OpShape& s); // classifier backward, the product's backward

// Model FLOPs of one micro-step's forward and backward (the products only: what MFU counts), and the
// forward alone (what a full recompute adds).
double products_flops(const std::vector<OpCost>& ops);

}  // namespace gpt
