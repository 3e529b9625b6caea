// What each backend op costs, one function per op of the Backend interface (src/backend/backend.h): FLOPs
// for the products, bytes for the memory-bound ops, from the op's own arguments. The simulated machine
// (src/sim) prices every call the model and the engine make with these and a hardware file's rates
// (src/plan/rank_rates.h); nothing here knows the order of a step or about time.
//
// Products are rated by M*N*K (a curve in the hardware file); a product's backward (dinp and dw, one
// matmul_backward call) by its own curve when the file has one; a plain product also carries its sides,
// which a profile with a gemm_edge prices too (src/plan/gemm_shape.h). On the CPU backend the attention's per-head
// products are single-threaded and run side by side on the threads (OpClass::gemm_tasks). On the CUDA
// backend the simple attention path's batched products are one call each, rated at their total M*N*K;
// the fused path is rated as the products it computes (the causal half of Q K^T and P V forward, and 2.5x
// that backward: Q K^T again, dP, dS^T Q, dS K, P^T dO).
//
// Layernorm, GELU and the classifier also carry their kernel family and element count: a calibrated CPU
// file rates them by elements (their exp work, not their bytes, bounds them there). Bytes are what an op
// reads plus what it writes, at the compute dtype's size for activations and 4 for fp32 statistics,
// gradients and model states. The classifier's training pass (losses and dlogits together) makes 5 passes
// over the logits on the CPU (max, exp-sum + write, scale + write), one read and one write on CUDA. The
// fused ops (residual + layernorm, layernorm backward + residual, matmul + GELU, GELU backward + matmul
// backward) are priced as the two ops they replace, in one launch (the CPU twins run the pair row by row).
//
// The tensor-parallel ops: the vocab-slice lookup and its gradient are priced as if every token lay in the slice
// (an upper bound: the op does not know how the tokens fall), the position embedding and the bias as the
// element-wise adds they are, and the bias gradient as matmul's dbias. The vocab-parallel loss makes the
// classifier's passes over this rank's N*Vs logits: the statistics one read (the row max, no exp), the exp-sum
// one read (rated as classifier_forward by its N*valid elements where a profile has that family: its exp work
// is the forward's, less the max pass), the backward with dlogits a read and a write on cuda, two of each on the
// cpu (the exponentials written, then scaled), rated as classifier_backward by its N*valid elements, and
// without dlogits only its per-row statistics.
#pragma once
#include <array>
#include <cstdint>
#include <initializer_list>

namespace gpt {

enum class OpClass {
  gemm,           // one product: flops at gemm(mnk)
  gemm_backward,  // a product's backward call (dinp and dw): flops at gemm_backward(mnk)
  gemm_tasks,     // many single-threaded products in parallel: flops at gemm_tasks(mnk)
  stream,         // a parallel loop over memory: bytes at stream(bytes)
  copy,           // a copy or fill: bytes at copy(bytes)
  host_stream,    // a loop over host memory (offloaded states): bytes at the host bandwidth
  pcie,           // host <-> device copy: bytes at the PCIe bandwidth
};

struct OpCost {
  const char* name = "";  // a string literal (an op is priced millions of times in a plan search: no allocation)
  OpClass cls = OpClass::stream;
  double mnk = 0;    // gemm, gemm_tasks: M*N*K of one product (the size the rate is read at)
  double m = 0, n = 0, k = 0;  // gemm, gemm_backward: the product's sides, for the profile's gemm_edge
                               // (src/plan/gemm_shape.h); 0 where the op is not one plain product
  double flops = 0;  // gemm, gemm_tasks: all products of the op
  double bytes = 0;  // the memory classes: bytes read + written (copy, pcie: bytes copied)
  const char* kernel = nullptr;  // stream ops of a kernel family a profile may rate by elements (hardware.h
                                 // "kernels"); a string literal, null for none
  double elements = 0;  // its elements (layernorm N*C, gelu N*4C, classifier N*V, adamw parameters)
  int launches = 1;  // kernels (or parallel regions) the op starts: each pays the hardware's op overhead
};

// The costs of one Backend call: at most kMaxOps records, held in place (no allocation).
class OpCosts {
 public:
  static constexpr int kMaxOps = 3;  // gelu_matmul_backward: the backward, its dbias and the GELU's
  OpCosts() = default;
  OpCosts(std::initializer_list<OpCost> ops) {
    for (const OpCost& o : ops) push_back(o);
  }
  void push_back(const OpCost& o);
  int size() const { return n_; }
  bool empty() const { return n_ == 0; }
  OpCost& operator[](int i) { return ops_[i]; }
  const OpCost& operator[](int i) const { return ops_[i]; }
  OpCost& back() { return ops_[n_ - 1]; }
  const OpCost* begin() const { return ops_.data(); }
  const OpCost* end() const { return ops_.data() + n_; }

 private:
  std::array<OpCost, kMaxOps> ops_;
  int n_ = 0;
};

// Whose kernels run the op.
struct OpTarget {
  bool cpu = true;               // fp32 OpenBLAS + OpenMP (the cpu backend); else the cuda backend's kernels
  int64_t cs = 4;                // bytes per activation element (4 fp32 on cpu, 2 bf16 on cuda)
  bool fused_attention = false;  // --attention fused or cudnn: flash-style, priced as the causal half
  bool host = false;             // the op runs on the host side (offloaded states): memory ops at host_stream
};

namespace op_cost {
// Shapes as in backend.h: N rows, C channels, OC output channels, NH heads, V vocab, Vp padded vocab.
OpCosts encoder_forward(const OpTarget& t, int B, int T, int C);
OpCosts encoder_backward(const OpTarget& t, int B, int T, int C);
OpCosts layernorm_forward(const OpTarget& t, int N, int C);
OpCosts layernorm_backward(const OpTarget& t, int N, int C);
OpCosts residual_layernorm_forward(const OpTarget& t, int N, int C);
OpCosts layernorm_backward_residual(const OpTarget& t, int N, int C);
OpCosts matmul_forward(const OpTarget& t, int N, int C, int OC);
OpCosts matmul_gelu_forward(const OpTarget& t, int N, int C, int OC);
OpCosts matmul_backward(const OpTarget& t, int N, int C, int OC, bool bias);
OpCosts gelu_matmul_backward(const OpTarget& t, int N, int C, int OC, bool bias);
OpCosts attention_forward(const OpTarget& t, int B, int T, int C, int NH);
OpCosts attention_backward(const OpTarget& t, int B, int T, int C, int NH);
OpCosts attention_cached_forward(const OpTarget& t, int B, int Tn, int past, int C, int NH);
OpCosts gelu_forward(const OpTarget& t, double n);
OpCosts gelu_backward(const OpTarget& t, double n);
OpCosts residual_forward(const OpTarget& t, double n);
OpCosts residual_backward(const OpTarget& t, double n);
OpCosts classifier_forward(const OpTarget& t, int N, int V, int Vp);
OpCosts classifier_backward(const OpTarget& t, int N, int V, int Vp);
// Tensor parallelism (backend.h's section): Vs this rank's columns of the vocabulary, `valid` of them real.
OpCosts embedding_slice_forward(const OpTarget& t, int N, int C);
OpCosts embedding_slice_backward(const OpTarget& t, int N, int C);
OpCosts position_forward(const OpTarget& t, int n, int C);
OpCosts position_backward(const OpTarget& t, int n, int T, int C);
OpCosts bias_forward(const OpTarget& t, int N, int OC);
OpCosts bias_backward(const OpTarget& t, int N, int OC);
OpCosts classifier_slice_stats(const OpTarget& t, int N, int Vs);
OpCosts classifier_slice_sumexp(const OpTarget& t, int N, int valid, int Vs);
OpCosts classifier_slice_backward(const OpTarget& t, int N, int valid, int Vs, bool dlogits);
// The engine's and the optimizer's memory work.
OpCosts adamw_update(const OpTarget& t, double n, bool param_out);
OpCosts sum_squares(const OpTarget& t, double n);
OpCosts accumulate_f32(const OpTarget& t, double n);
OpCosts zero(const OpTarget& t, double bytes);      // a fill: one thread's loop on the cpu, a kernel on cuda
OpCosts copy_d2d(const OpTarget& t, double bytes);
OpCosts convert(const OpTarget& t, const char* name, double n, double bytes_per_element);  // dtype conversions
OpCosts host_device_copy(const char* name, double bytes);  // over PCIe (the cpu backend: a memcpy)
}  // namespace op_cost

// FLOPs of the products among ops (what MFU and the hardware FLOPs count).
double products_flops(const OpCosts& ops);

}  // namespace gpt
