// LayerNorm over the last dimension: out = (x - mean) * rstd * w + b, eps 1e-5, biased variance, two-pass
// statistics (mean first, then the centred sum of squares) so large offsets do not cancel.
// Backward (per row, with xhat = (x - mean) * rstd and g = w * dout):
//   dinp = rstd * (g - mean(g) - xhat * mean(g * xhat)),   dw += sum_rows dout * xhat,   db += sum_rows dout.
// The dw/db row sums are taken in fixed chunks of rows (partials per chunk, then chunks added in order), so
// they are one pass over the data and independent of the thread count.
//
// The fused ops are the pairs they replace, row by row: residual_layernorm_forward is residual_forward then
// layernorm_forward, layernorm_backward_residual is layernorm_backward then residual_backward. Each row goes
// through the same out-of-line row function as the plain op, so the compiler makes the same contraction and
// vectorisation choices for both (an inlined copy could fuse `dres += rstd * (...)` into one FMA, which rounds
// differently from the pair): the results are bit-identical to the pairs.
#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/cpu/ops.h"

namespace gpt::cpu {

namespace {

// One row of layernorm_forward: o (C) from x (C), and the row's mean and rstd.
__attribute__((noinline)) void layernorm_row(float* o, float* mean, float* rstd, const float* x, const float* w,
                                             const float* b, int C) {
  float s = 0.0f;
#pragma omp simd reduction(+ : s)
  for (int c = 0; c < C; c++) s += x[c];
  float m = s / C;
  float ss = 0.0f;
#pragma omp simd reduction(+ : ss)
  for (int c = 0; c < C; c++) ss += (x[c] - m) * (x[c] - m);
  float r = 1.0f / std::sqrt(ss / C + 1e-5f);
#pragma omp simd
  for (int c = 0; c < C; c++) o[c] = (x[c] - m) * r * w[c] + b[c];
  *mean = m;
  *rstd = r;
}

// One row of layernorm_backward: dx (C) overwritten, pdw/pdb (C) the chunk's partial sums (+=).
__attribute__((noinline)) void layernorm_backward_row(float* dx, float* pdw, float* pdb, const float* d,
                                                      const float* x, const float* w, float m, float r, int C) {
  float gmean = 0.0f, gxmean = 0.0f;
#pragma omp simd reduction(+ : gmean, gxmean)
  for (int c = 0; c < C; c++) {
    float xhat = (x[c] - m) * r;
    float g = w[c] * d[c];
    gmean += g;
    gxmean += g * xhat;
    pdw[c] += d[c] * xhat;
    pdb[c] += d[c];
  }
  gmean /= C;
  gxmean /= C;
#pragma omp simd
  for (int c = 0; c < C; c++) {
    float xhat = (x[c] - m) * r;
    dx[c] = r * (w[c] * d[c] - gmean - xhat * gxmean);
  }
}

// layernorm_backward over N rows. With `accumulate`, each row's input gradient goes to a per-thread row
// buffer and is then added into dinp (dres += dx, as residual_backward adds it); else it overwrites dinp.
void layernorm_backward_rows(float* dinp, float* dw, float* db, const float* dout, const float* inp,
                             const float* w, const float* mean, const float* rstd, int N, int C, bool accumulate) {
  if (N <= 0) return;
  const int kRows = 64;  // rows per chunk of the dw/db partial sums
  int nchunks = (N + kRows - 1) / kRows;
  std::vector<float> part(static_cast<size_t>(nchunks) * 2 * C);  // (nchunks, 2, C): dw then db partials
#pragma omp parallel
  {
    std::vector<float> row(accumulate ? C : 0);  // (C) this thread's dx of one row
#pragma omp for schedule(static)
    for (int k = 0; k < nchunks; k++) {
      float* pdw = part.data() + static_cast<size_t>(k) * 2 * C;  // (C)
      float* pdb = pdw + C;                                        // (C)
      std::fill(pdw, pdw + 2 * C, 0.0f);
      for (int i = k * kRows; i < std::min(N, (k + 1) * kRows); i++) {
        const size_t off = static_cast<size_t>(i) * C;
        float* dx = accumulate ? row.data() : dinp + off;  // (C)
        layernorm_backward_row(dx, pdw, pdb, dout + off, inp + off, w, mean[i], rstd[i], C);
        if (accumulate) {
          float* dres = dinp + off;  // (C)
#pragma omp simd
          for (int c = 0; c < C; c++) dres[c] += dx[c];
        }
      }
    }
  }
  // Add the chunk partials in chunk order (small: nchunks * 2C floats), then into the gradients.
  float* acc = part.data();  // (2, C): chunk 0's partials become the running sum
  for (int k = 1; k < nchunks; k++) {
    const float* pk = part.data() + static_cast<size_t>(k) * 2 * C;  // (2, C)
#pragma omp simd
    for (int c = 0; c < 2 * C; c++) acc[c] += pk[c];
  }
#pragma omp simd
  for (int c = 0; c < C; c++) {
    dw[c] += acc[c];
    db[c] += acc[C + c];
  }
}

}  // namespace

void layernorm_forward(float* out, float* mean, float* rstd, const float* inp, const float* w, const float* b,
                       int N, int C) {
#pragma omp parallel for schedule(static)
  for (int i = 0; i < N; i++) {
    const size_t off = static_cast<size_t>(i) * C;
    layernorm_row(out + off, mean + i, rstd + i, inp + off, w, b, C);
  }
}

void residual_layernorm_forward(float* res, float* out, float* mean, float* rstd, const float* a, const float* b,
                                const float* w, const float* bias, int N, int C) {
#pragma omp parallel for schedule(static)
  for (int i = 0; i < N; i++) {
    const size_t off = static_cast<size_t>(i) * C;
    float* x = res + off;  // (C)
#pragma omp simd
    for (int c = 0; c < C; c++) x[c] = a[off + c] + b[off + c];
    layernorm_row(out + off, mean + i, rstd + i, x, w, bias, C);
  }
}

void layernorm_backward(float* dinp, float* dw, float* db, const float* dout, const float* inp, const float* w,
                        const float* mean, const float* rstd, int N, int C) {
  layernorm_backward_rows(dinp, dw, db, dout, inp, w, mean, rstd, N, C, false);
}

void layernorm_backward_residual(float* dres, float* dw, float* db, const float* dout, const float* inp,
                                 const float* w, const float* mean, const float* rstd, int N, int C) {
  layernorm_backward_rows(dres, dw, db, dout, inp, w, mean, rstd, N, C, true);
}

}  // namespace gpt::cpu
