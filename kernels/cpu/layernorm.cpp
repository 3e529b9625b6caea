// LayerNorm over the last dimension: out = (x - mean) * rstd * w + b, eps 1e-5, biased variance, two-pass
// statistics (mean first, then the centred sum of squares) so large offsets do not cancel.
// Backward (per row, with xhat = (x - mean) * rstd and g = w * dout):
//   dinp = rstd * (g - mean(g) - xhat * mean(g * xhat)),   dw += sum_rows dout * xhat,   db += sum_rows dout.
// The dw/db row sums are taken in fixed chunks of rows (partials per chunk, then chunks added in order), so
// they are one pass over the data and independent of the thread count.
#include <algorithm>
#include <vector>

#include "kernels/cpu/ops.h"

namespace gpt::cpu {

void layernorm_forward(float* out, float* mean, float* rstd, const float* inp, const float* w, const float* b,
                       int N, int C) {
#pragma omp parallel for schedule(static)
  for (int i = 0; i < N; i++) {
    const float* x = inp + static_cast<size_t>(i) * C;  // (C)
    float* o = out + static_cast<size_t>(i) * C;        // (C)
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
    mean[i] = m;
    rstd[i] = r;
  }
}

void layernorm_backward(float* dinp, float* dw, float* db, const float* dout, const float* inp, const float* w,
                        const float* mean, const float* rstd, int N, int C) {
  if (N <= 0) return;
  const int kRows = 64;  // rows per chunk of the dw/db partial sums
  int nchunks = (N + kRows - 1) / kRows;
  std::vector<float> part(static_cast<size_t>(nchunks) * 2 * C);  // (nchunks, 2, C): dw then db partials
#pragma omp parallel for schedule(static)
  for (int k = 0; k < nchunks; k++) {
    float* pdw = part.data() + static_cast<size_t>(k) * 2 * C;  // (C)
    float* pdb = pdw + C;                                        // (C)
    std::fill(pdw, pdw + 2 * C, 0.0f);
    for (int i = k * kRows; i < std::min(N, (k + 1) * kRows); i++) {
      const float* x = inp + static_cast<size_t>(i) * C;   // (C)
      const float* d = dout + static_cast<size_t>(i) * C;  // (C)
      float* dx = dinp + static_cast<size_t>(i) * C;       // (C)
      float m = mean[i], r = rstd[i];
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

}  // namespace gpt::cpu
