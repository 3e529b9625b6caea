// Token + position embedding. Forward is a gather per row. Backward scatters rows back into dwte/dwpe;
// because the same token may appear many times, threads split the CHANNELS (each owns a column range of
// both tables and walks all rows in order): no atomics, no per-thread copies of the (Vp,C) table, and the
// sum order is the row order whatever the thread count.
//
// The tensor-parallel pieces of the same op (a slice of the vocabulary, a range of grid rows) share these
// loops: the slice's lookup is the gather with zero rows for tokens outside the slice, position_forward adds
// the wpe rows (add_table_rows, ops.h), and both backward ops are the same channel-block walk over the rows
// (scatter_rows below), so over the whole vocabulary and all rows they reproduce encoder_backward bit for bit.
#include <algorithm>

#include "src/core/check.h"
#include "kernels/cpu/ops.h"

namespace gpt::cpu {

namespace {
void check_tokens(const int* tokens, size_t n) {
  for (size_t i = 0; i < n; i++)
    GPT_CHECK(tokens[i] >= 0, "encoder: token id ", tokens[i], " at position ", i, " is negative");
}

// The channel-block walk of the backward ops: add_row(i, c0, c1) runs for every row i = 0..N-1 in order within
// each block [c0, c1) of kCols channels, the blocks split across threads. Every output element is owned by one
// block, so its sum runs in row order whatever the thread count.
template <class AddRow>
void scatter_rows(int N, int C, AddRow add_row) {
  const int kCols = 64;  // channels per task: 256 bytes of each row, a few cache lines
  int nblocks = (C + kCols - 1) / kCols;
#pragma omp parallel for schedule(static)
  for (int blk = 0; blk < nblocks; blk++) {
    int c0 = blk * kCols, c1 = std::min(C, c0 + kCols);
    for (int i = 0; i < N; i++) add_row(i, c0, c1);
  }
}

// dst[c0..c1) += src[c0..c1)
inline void add_channels(float* dst /*(C)*/, const float* src /*(C)*/, int c0, int c1) {
#pragma omp simd
  for (int c = c0; c < c1; c++) dst[c] += src[c];
}

// The row of the slice [lo, lo + rows) that token `tok` selects, or -1 when the token lies outside it.
inline long slice_row(int tok, int lo, int rows) { return tok >= lo && tok - lo < rows ? tok - lo : -1; }

void check_slice(int lo, int rows) {
  GPT_CHECK(lo >= 0 && rows >= 0, "embedding slice: expected lo >= 0 and rows >= 0, got lo=", lo, " rows=", rows);
}
void check_rows(int first, int n, int T) {
  GPT_CHECK(first >= 0 && n >= 0 && T > 0, "position embedding: expected first >= 0, n >= 0 and T > 0, got first=",
            first, " n=", n, " T=", T);
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
  scatter_rows(B * T, C, [=](int i, int c0, int c1) {
    const float* d = dout + static_cast<size_t>(i) * C;  // (C)
    add_channels(dwte + static_cast<size_t>(tokens[i]) * C, d, c0, c1);
    add_channels(dwpe + static_cast<size_t>(i % T) * C, d, c0, c1);
  });
}

void embedding_slice_forward(float* out, const int* tokens, const float* wte_rows, int lo, int rows, int N, int C) {
  check_slice(lo, rows);
  check_tokens(tokens, static_cast<size_t>(N));
#pragma omp parallel for schedule(static)
  for (long i = 0; i < N; i++) {
    const long r = slice_row(tokens[i], lo, rows);
    float* o = out + static_cast<size_t>(i) * C;  // (C)
    if (r < 0) {
      std::fill(o, o + C, 0.0f);
    } else {
      const float* e = wte_rows + static_cast<size_t>(r) * C;  // (C)
      std::copy(e, e + C, o);
    }
  }
}

void embedding_slice_backward(float* dwte_rows, const float* dout, const int* tokens, int lo, int rows, int N, int C) {
  check_slice(lo, rows);
  check_tokens(tokens, static_cast<size_t>(N));
  scatter_rows(N, C, [=](int i, int c0, int c1) {
    const long r = slice_row(tokens[i], lo, rows);
    if (r >= 0) add_channels(dwte_rows + static_cast<size_t>(r) * C, dout + static_cast<size_t>(i) * C, c0, c1);
  });
}

void position_forward(float* x, const float* wpe, int first, int n, int T, int C) {
  check_rows(first, n, T);
  add_table_rows(x, wpe, first, n, T, C);
}

void position_backward(float* dwpe, const float* dout, int first, int n, int T, int C) {
  check_rows(first, n, T);
  scatter_rows(n, C, [=](int i, int c0, int c1) {
    const size_t t = (static_cast<size_t>(first) + i) % T;
    add_channels(dwpe + t * C, dout + static_cast<size_t>(i) * C, c0, c1);
  });
}

}  // namespace gpt::cpu
