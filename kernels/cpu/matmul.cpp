// Fully connected layer, out = inp @ w^T + bias, on OpenBLAS sgemm (row-major, w stored (OC, C) as in
// PyTorch's nn.Linear). Called outside any parallel region, so sgemm uses all of OpenBLAS's threads.
// The bias is free: OpenBLAS with beta = 0 first clears C in a separate pass, so instead we write the bias
// rows into `out` and call sgemm with beta = 1 (same number of passes over `out` as a bias-less sgemm).
// Backward: dinp = dout @ w (overwrite), dw += dout^T @ inp (beta = 1), dbias += column sums of dout,
// taken by threads that each own a block of columns and walk the rows in order (cache-friendly, and the
// sum order does not depend on the thread count). gelu_matmul_backward is matmul_backward followed by the
// GELU's backward in place on dinp (the pair the model ran before, so the results are bit-identical).
//
// bias_forward and bias_backward (tensor parallelism: a row-parallel product adds its bias once, after the
// reduction of the partial products) live here because they are a linear layer's bias on its own: the
// gradient is matmul_backward's dbias loop itself (so the same dout gives the same dbias bit for bit), and the
// forward adds the bias row to every row (add_table_rows, ops.h, with a table of one row).
#include <cblas.h>

#include <algorithm>

#include "kernels/cpu/ops.h"

namespace gpt::cpu {

void matmul_forward(float* out, const float* inp, const float* w, const float* bias, int N, int C, int OC) {
  float beta = 0.0f;
  if (bias) {
#pragma omp parallel for schedule(static)
    for (int i = 0; i < N; i++) std::copy(bias, bias + OC, out + static_cast<size_t>(i) * OC);
    beta = 1.0f;
  }
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, N, OC, C, 1.0f, inp, C, w, C, beta, out, OC);
}

void bias_forward(float* x, const float* bias, int N, int OC) { add_table_rows(x, bias, 0, N, 1, OC); }

// dbias[o] += sum_i dout[i, o]: each task owns a block of 16..256 columns (enough blocks to feed every
// thread) and walks the rows in order.
void bias_backward(float* dbias, const float* dout, int N, int OC) {
  const int kMaxCols = 256;
  int per_thread = (OC + max_threads() - 1) / max_threads();
  int cols = std::clamp((per_thread + 15) / 16 * 16, 16, kMaxCols);
  int nblocks = (OC + cols - 1) / cols;
#pragma omp parallel for schedule(static)
  for (int blk = 0; blk < nblocks; blk++) {
    int o0 = blk * cols, n = std::min(OC, o0 + cols) - o0;
    float acc[kMaxCols] = {};  // (n) running column sums for this block
    for (int i = 0; i < N; i++) {
      const float* d = dout + static_cast<size_t>(i) * OC + o0;  // (n)
#pragma omp simd
      for (int o = 0; o < n; o++) acc[o] += d[o];
    }
#pragma omp simd
    for (int o = 0; o < n; o++) dbias[o0 + o] += acc[o];
  }
}

void matmul_gelu_forward(float* out, float* pre, const float* inp, const float* w, const float* bias, int N, int C,
                         int OC) {
  matmul_forward(pre, inp, w, bias, N, C, OC);
  gelu_forward(out, pre, static_cast<size_t>(N) * OC);
}

void matmul_backward(float* dinp, float* dw, float* dbias, const float* dout, const float* inp, const float* w,
                     int N, int C, int OC) {
  if (dinp) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, N, C, OC, 1.0f, dout, OC, w, C, 0.0f, dinp, C);
  }
  cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, OC, C, N, 1.0f, dout, OC, inp, C, 1.0f, dw, C);
  if (dbias) bias_backward(dbias, dout, N, OC);
}

void gelu_matmul_backward(float* dpre, float* dw, float* dbias, const float* dout, const float* inp, const float* pre,
                          const float* w, int N, int C, int OC) {
  matmul_backward(dpre, dw, dbias, dout, inp, w, N, C, OC);
  gelu_backward(dpre, pre, dpre, static_cast<size_t>(N) * C);  // in place: element i reads dout[i], writes dinp[i]
}

}  // namespace gpt::cpu
