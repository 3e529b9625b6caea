// Token + position embedding. Forward is a gather per row. Backward scatters rows back into dwte/dwpe;
// because the same token may appear many times, threads split the CHANNELS (each owns a column range of
// both tables and walks all rows in order): no atomics, no per-thread copies of the (Vp,C) table, and the
// sum order is the row order whatever the thread count.
#include <algorithm>

#include "src/core/check.h"
#include "kernels/cpu/ops.h"

namespace gpt::cpu {

namespace {
void check_tokens(const int* tokens, size_t n) {
  for (size_t i = 0; i < n; i++)
    GPT_CHECK(tokens[i] >= 0, "encoder: token id ", tokens[i], " at position ", i, " is negative");
}
}  // namespace

void encoder_forward(float* out, const int* tokens, const float* wte, const float* wpe, int B, int T, int C) {
  check_tokens(tokens, static_cast<size_t>(B) * T);
#pragma omp parallel for schedule(static)
  for (long bt = 0; bt < static_cast<long>(B) * T; bt++) {
    int t = static_cast<int>(bt % T);
    const float* e = wte + static_cast<size_t>(tokens[bt]) * C;  // (C)
    const float* p = wpe + static_cast<size_t>(t) * C;           // (C)
    float* o = out + static_cast<size_t>(bt) * C;                // (C)
#pragma omp simd
    for (int c = 0; c < C; c++) o[c] = e[c] + p[c];
  }
}

void encoder_backward(float* dwte, float* dwpe, const float* dout, const int* tokens, int B, int T, int C) {
  check_tokens(tokens, static_cast<size_t>(B) * T);
  const int kCols = 64;  // channels per task: 256 bytes of each row, a few cache lines
  int nblocks = (C + kCols - 1) / kCols;
#pragma omp parallel for schedule(static)
  for (int blk = 0; blk < nblocks; blk++) {
    int c0 = blk * kCols, c1 = std::min(C, c0 + kCols);
    for (int b = 0; b < B; b++) {
      for (int t = 0; t < T; t++) {
        size_t bt = static_cast<size_t>(b) * T + t;
        const float* d = dout + bt * C;                              // (C)
        float* e = dwte + static_cast<size_t>(tokens[bt]) * C;       // (C)
        float* p = dwpe + static_cast<size_t>(t) * C;                // (C)
#pragma omp simd
        for (int c = c0; c < c1; c++) {
          e[c] += d[c];
          p[c] += d[c];
        }
      }
    }
  }
}

}  // namespace gpt::cpu
