// The CPU kernels: fp32, OpenMP across cores, OpenBLAS sgemm for every matrix product. One free function
// per Backend op, with the Backend method's argument order, so the CPU backend is a thin forwarder and the
// CUDA twins (kernels/cuda) can be tested against these. The host-side helpers at the bottom (adamw_update,
// sum_squares, accumulate_f32) are also what the CUDA backend runs on offloaded (host) shards.
//
// Conventions (see src/backend/backend.h): backward ops OVERWRITE activation gradients (dinp, dqkv) and
// ACCUMULATE (+=) parameter gradients (dw, db). N = B*T rows. All reductions that feed a parameter gradient
// or a norm sum in an order that does not depend on the thread count, so results are reproducible.
//
// Threads: link the OpenMP build of OpenBLAS. It shares OpenMP's thread pool, and runs single-threaded when
// called inside a parallel region (attention relies on that). With the pthread build, OpenMP's spinning
// workers and OpenBLAS's own threads fight over the cores whenever a kernel and an sgemm follow each other
// (measured on 2 cores: matmul_forward with bias 1.8x slower than the bare sgemm, against +1% with the
// OpenMP build); results are the same either way.
#pragma once
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "kernels/adamw_params.h"
#ifdef _OPENMP
#include <omp.h>
#endif

namespace gpt::cpu {

// ---- encoder: out = wte[tokens] + wpe[t] ----------------------------------------------------------
void encoder_forward(float* out /*(B,T,C)*/, const int* tokens /*(B,T)*/, const float* wte /*(Vp,C)*/,
                     const float* wpe /*(maxT,C)*/, int B, int T, int C);
void encoder_backward(float* dwte /*(Vp,C) +=*/, float* dwpe /*(maxT,C) +=*/, const float* dout /*(B,T,C)*/,
                      const int* tokens /*(B,T)*/, int B, int T, int C);

// The vocab-parallel pieces of the same op (tensor parallelism, Backend's section): the lookup of the tokens
// that lie in wte rows [lo, lo + rows) (0 for the others), its gradient, and the position embedding of n rows
// starting at grid row `first` (wpe[(first + i) % T]). encoder_forward is embedding_slice_forward over the whole
// vocabulary then position_forward over all rows, bit for bit; the backward ops sum in row order as
// encoder_backward does, so over the whole vocabulary and all rows they give its gradients bit for bit.
void embedding_slice_forward(float* out /*(N,C)*/, const int* tokens /*(N)*/, const float* wte_rows /*(rows,C)*/,
                             int lo, int rows, int N, int C);
void embedding_slice_backward(float* dwte_rows /*(rows,C) +=*/, const float* dout /*(N,C)*/, const int* tokens /*(N)*/,
                              int lo, int rows, int N, int C);
void position_forward(float* x /*(n,C) +=*/, const float* wpe /*(maxT,C)*/, int first, int n, int T, int C);
void position_backward(float* dwpe /*(maxT,C) +=*/, const float* dout /*(n,C)*/, int first, int n, int T, int C);

// ---- layernorm over the last dim (eps 1e-5, biased variance) ------------------------------------
void layernorm_forward(float* out /*(N,C)*/, float* mean /*(N)*/, float* rstd /*(N)*/,
                       const float* inp /*(N,C)*/, const float* w /*(C)*/, const float* b /*(C)*/, int N,
                       int C);
void layernorm_backward(float* dinp /*(N,C) =*/, float* dw /*(C) +=*/, float* db /*(C) +=*/,
                        const float* dout /*(N,C)*/, const float* inp /*(N,C)*/, const float* w /*(C)*/,
                        const float* mean /*(N)*/, const float* rstd /*(N)*/, int N, int C);
// res = a + b, then out = layernorm(res): residual_forward followed by layernorm_forward, row by row, with
// results bit-identical to that pair.
void residual_layernorm_forward(float* res /*(N,C)*/, float* out /*(N,C)*/, float* mean /*(N)*/, float* rstd /*(N)*/,
                                const float* a /*(N,C)*/, const float* b /*(N,C)*/, const float* w /*(C)*/,
                                const float* bias /*(C)*/, int N, int C);
// dres += the layernorm's input gradient: layernorm_backward then residual_backward, bit-identical to that
// pair, without the (N,C) dinp buffer. dw, db as layernorm_backward.
void layernorm_backward_residual(float* dres /*(N,C) +=*/, float* dw /*(C) +=*/, float* db /*(C) +=*/,
                                 const float* dout /*(N,C)*/, const float* inp /*(N,C)*/, const float* w /*(C)*/,
                                 const float* mean /*(N)*/, const float* rstd /*(N)*/, int N, int C);

// ---- matmul: out = inp @ w^T + bias -------------------------------------------------------------
void matmul_forward(float* out /*(N,OC)*/, const float* inp /*(N,C)*/, const float* w /*(OC,C)*/,
                    const float* bias /*(OC) or null*/, int N, int C, int OC);
// pre = inp @ w^T + bias, out = gelu(pre): the two ops in sequence (the GPU fuses them into one product).
void matmul_gelu_forward(float* out /*(N,OC)*/, float* pre /*(N,OC)*/, const float* inp /*(N,C)*/,
                         const float* w /*(OC,C)*/, const float* bias /*(OC) or null*/, int N, int C, int OC);
void matmul_backward(float* dinp /*(N,C) = or null*/, float* dw /*(OC,C) +=*/, float* dbias /*(OC) += or null*/,
                     const float* dout /*(N,OC)*/, const float* inp /*(N,C)*/, const float* w /*(OC,C)*/, int N,
                     int C, int OC);
// Backward of the layer after a GELU, out = gelu(pre) @ w^T + bias, through the GELU: dpre = gelu'(pre) *
// (dout @ w), dw += dout^T @ gelu(pre), dbias += column sums of dout. matmul_backward then gelu_backward in
// place, bit-identical to that pair (the GPU puts the GELU derivative in the product's epilogue).
void gelu_matmul_backward(float* dpre /*(N,C) =*/, float* dw /*(OC,C) +=*/, float* dbias /*(OC) += or null*/,
                          const float* dout /*(N,OC)*/, const float* inp /*(N,C) = gelu(pre)*/,
                          const float* pre /*(N,C)*/, const float* w /*(OC,C)*/, int N, int C, int OC);

// A bias added on its own (a row-parallel product's, after the reduction of its partial products): x += bias on
// every row; and its gradient, the column sums of dout in row order (matmul_backward's dbias, the same loop).
void bias_forward(float* x /*(N,OC) +=*/, const float* bias /*(OC)*/, int N, int OC);
void bias_backward(float* dbias /*(OC) +=*/, const float* dout /*(N,OC)*/, int N, int OC);

// ---- causal self-attention on packed qkv; the state is the softmax probabilities -----------------
void attention_forward(float* out /*(B,T,C)*/, float* att /*(B,NH,T,T)*/, const float* qkv /*(B,T,3C)*/,
                       int B, int T, int C, int NH);
void attention_backward(float* dqkv /*(B,T,3C) =*/, const float* dout /*(B,T,C)*/,
                        const float* qkv /*(B,T,3C)*/, const float* att /*(B,NH,T,T)*/, int B, int T, int C,
                        int NH);
// Over a key/value cache (sampling): k and v of the Tn new positions go into the caches at past.., then
// each new query attends over positions 0..its own (Backend::attention_cached_forward).
void attention_cached_forward(float* out /*(B,Tn,C)*/, float* kcache /*(B,NH,Tmax,hs)*/,
                              float* vcache /*(B,NH,Tmax,hs)*/, const float* qkv /*(B,Tn,3C)*/, int B, int Tn,
                              int past, int Tmax, int C, int NH);

// ---- GELU, tanh approximation -------------------------------------------------------------------
void gelu_forward(float* out /*(n)*/, const float* inp /*(n)*/, size_t n);
// dinp may be dout itself (in place).
void gelu_backward(float* dinp /*(n) =*/, const float* inp /*(n)*/, const float* dout /*(n)*/, size_t n);

// ---- residual: out = a + b; backward dstream += dbranch --------------------------------------------
void residual_forward(float* out /*(n)*/, const float* a /*(n)*/, const float* b /*(n)*/, size_t n);
void residual_backward(float* dstream /*(n) +=*/, const float* dbranch /*(n)*/, size_t n);

// ---- classifier: softmax cross-entropy over the first V of Vp columns ------------------------------
void classifier_forward(float* losses /*(N)*/, const float* logits /*(N,Vp)*/, const int* targets /*(N)*/,
                        int N, int V, int Vp);
// The training pass: losses and dlogits in place in one pass, and, when loss_sum is not null, the N losses
// summed in double in row order and added to *loss_sum.
void classifier_backward(float* logits_to_dlogits /*(N,Vp)*/, float* losses /*(N)*/, double* loss_sum /*(1) +=*/,
                         const int* targets /*(N)*/, float dloss, int N, int V, int Vp);

// The vocab-parallel cross-entropy over this rank's columns [lo, lo + Vs) of the vocabulary, the first `valid`
// real (Backend::classifier_slice_*): the row max and the target's logit, then the exp-sum at the group's max,
// then the losses (and the dlogits in place, when logits_to_dlogits is not null) from the group's statistics.
// Same fast_exp, row_max and summation loops as the two ops above.
void classifier_slice_stats(float* maxes /*(N)*/, float* target /*(N)*/, const float* logits /*(N,Vs)*/,
                            const int* targets /*(N)*/, int lo, int valid, int N, int Vs, int V);
void classifier_slice_sumexp(float* sums /*(N)*/, const float* logits /*(N,Vs)*/, const float* maxes /*(N)*/,
                             int valid, int N, int Vs);
void classifier_slice_backward(float* logits_to_dlogits /*(N,Vs) or null*/, float* losses /*(N)*/,
                               double* loss_sum /*(1) += or null*/, const float* maxes /*(N)*/,
                               const float* sums /*(N)*/, const float* target /*(N)*/, const int* targets /*(N)*/,
                               int lo, int valid, float dloss, int N, int Vs);

// ---- optimizer and reductions on fp32 buffers (also used on host shards by the CUDA backend) -------
// param_out (n) or null: receives a copy of the updated parameters (the compute dtype here is fp32).
void adamw_update(float* param /*(n)*/, const float* grad /*(n)*/, float* m /*(n)*/, float* v /*(n)*/,
                  float* param_out /*(n) or null*/, size_t n, const AdamWParams& hp);
double sum_squares(const float* x /*(n)*/, size_t n);
// The sums of squares of count buffers (xs[i], ns[i] elements each), added in index order from 0.
double sum_squares_all(const float* const* xs /*(count)*/, const size_t* ns /*(count)*/, int count);
void accumulate_f32(float* y /*(n) +=*/, const float* x /*(n)*/, size_t n, float divisor);

// ---- shared inline helpers --------------------------------------------------------------------------
// Threads an OpenMP parallel region would get here (1 in a build without OpenMP).
inline int max_threads() {
#ifdef _OPENMP
  return omp_get_max_threads();
#else
  return 1;
#endif
}

// Runs body(i0, i1) over [0, n) for an elementwise loop: on the calling thread when n is small (thread
// start-up would cost more than the loop) or there is one thread, else in one contiguous slice per OpenMP
// thread. The body's own loop carries `#pragma omp simd`. Why not `omp parallel for simd ... if (...)`: GCC
// compiles that construct's serial (if-false) path without vectorising it, and GELU ran 8x slower there.
// Elementwise bodies give the same result for any split.
constexpr size_t kParallelMin = 32768;  // elements below which a loop stays on the calling thread

template <class Body>
inline void parallel_ranges(size_t n, Body body) {
  const int nt = max_threads();
  if (n < kParallelMin || nt == 1) {
    body(size_t{0}, n);
    return;
  }
#pragma omp parallel for schedule(static)
  for (int k = 0; k < nt; k++) {
    size_t i0 = (n * k / nt) & ~size_t{15}, i1 = k == nt - 1 ? n : (n * (k + 1) / nt) & ~size_t{15};
    body(i0, i1);
  }
}

// x[i] += table[(first + i) % period] for the n rows of x (C channels each), one addition per element, rows in
// parallel: the position embedding of a row range (table wpe, period T) and a bias (a table of one row,
// period 1).
inline void add_table_rows(float* x /*(n,C) +=*/, const float* table /*(period,C)*/, int first, int n, int period,
                           int C) {
#pragma omp parallel for schedule(static)
  for (long i = 0; i < n; i++) {
    const float* r = table + static_cast<size_t>((first + i) % period) * C;  // (C)
    float* o = x + static_cast<size_t>(i) * C;                                // (C)
#pragma omp simd
    for (int c = 0; c < C; c++) o[c] += r[c];
  }
}

// max of x[0..n-1] (-inf for n = 0; NaN entries are skipped, as std::max(mx, x) would). Written as a
// comparison so the simd loop vectorises (vmaxps): GCC 12 keeps std::max under `omp simd` scalar. Softmax and
// the classifier use it.
inline float row_max(const float* x /*(n)*/, int n) {
  float mx = -INFINITY;
#pragma omp simd reduction(max : mx)
  for (int j = 0; j < n; j++) mx = x[j] > mx ? x[j] : mx;
  return mx;
}

// exp(x) for float, written so that `#pragma omp simd` loops vectorise it (glibc's expf does not vectorise
// without -ffast-math). Range reduction x = n*ln2 + r with |r| <= ln2/2 (ln2 split in two so n*ln2 is
// exact), a degree-6 polynomial for e^r (Cephes' coefficients), and 2^n built in the exponent bits.
// Relative error about 2 ulp over the normal range; returns 0 below -87.33 (where expf goes subnormal),
// +inf above 88.37 (where 2^n would leave the float range), NaN for NaN. Softmax and GELU use it.
inline float fast_exp(float x) {
  const float hi = 88.37f, lo = -87.33f;
  float xc = x >= lo ? (x <= hi ? x : hi) : lo;  // NaN -> lo, so the int conversion below stays defined
  const float round_magic = 12582912.0f;  // 1.5 * 2^23: adding and subtracting it rounds to nearest
  float n = (xc * 1.44269504088896341f + round_magic) - round_magic;
  float r = xc - n * 0.693359375f;
  r = r + n * 2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  int32_t bits = (static_cast<int32_t>(n) + 127) << 23;
  float scale;
  std::memcpy(&scale, &bits, sizeof scale);
  float y = p * scale;
  y = x < lo ? 0.0f : y;
  y = x > hi ? INFINITY : y;
  return x == x ? y : x;  // NaN in, NaN out
}

}  // namespace gpt::cpu
