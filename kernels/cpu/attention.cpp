// Causal multi-head self-attention on packed qkv (B, T, 3C) = [q | k | v], head h in columns h*hs..h*hs+hs
// of each part, scale 1/sqrt(hs). The state kept for backward is the softmax probabilities (B, NH, T, T),
// exactly 0 above the diagonal.
//
// Speed: every product is an sgemm on strided views of qkv (leading dimension 3C), so no head is copied.
// Rows are processed in blocks of kBlock: row block i only needs key columns 0..(i+1)*kBlock, which skips
// almost all of the masked upper triangle (half the flops at large T). Threads split the (b, h, row block)
// tasks in forward and the (b, h) pairs in backward (dK, dV sum over rows); each sgemm then runs on one
// thread: the OpenMP build of OpenBLAS does that by itself inside a parallel region, the pthread build is
// told to for the duration (BlasSerial).
//
// Sampling's variant (attention_cached_forward) runs the same row blocks over a key/value cache.
//
// Backward per head, with P the probabilities and dO the output gradient:
//   dP = dO V^T,  dS = P * (dP - rowsum(P * dP)),  dQ = scale dS K,  dK = scale dS^T Q,  dV = P^T dO.
#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "src/core/check.h"
#include "kernels/cpu/ops.h"

namespace gpt::cpu {

namespace {

constexpr int kBlock = 64;  // rows (queries) per block; also the column blocks of dK and dV

// Keeps a pthread OpenBLAS single-threaded while OpenMP threads call it (avoids cores x cores threads).
struct BlasSerial {
  int saved = 0;
  BlasSerial() {
    if (openblas_get_parallel() == OPENBLAS_THREAD && max_threads() > 1) {
      saved = openblas_get_num_threads();
      openblas_set_num_threads(1);
    }
  }
  ~BlasSerial() {
    if (saved > 0) openblas_set_num_threads(saved);
  }
};

// In place on row t of the scores (entries 0..t valid): softmax over 0..t, zeros in t+1..T-1.
void causal_softmax_row(float* row /*(T)*/, int t, int T) {
  const float mx = row_max(row, t + 1);
  float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
  for (int j = 0; j <= t; j++) {
    float e = fast_exp(row[j] - mx);
    row[j] = e;
    sum += e;
  }
  float inv = 1.0f / sum;
#pragma omp simd
  for (int j = 0; j <= t; j++) row[j] *= inv;
  std::fill(row + t + 1, row + T, 0.0f);
}

}  // namespace

void attention_forward(float* out, float* att, const float* qkv, int B, int T, int C, int NH) {
  GPT_CHECK(NH > 0 && C % NH == 0, "attention: channels ", C, " are not a multiple of the heads ", NH);
  const int hs = C / NH, C3 = 3 * C;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hs));
  const int nblk = (T + kBlock - 1) / kBlock;
  BlasSerial serial;
#pragma omp parallel for schedule(dynamic)
  for (long task = 0; task < static_cast<long>(B) * NH * nblk; task++) {
    int ib = static_cast<int>(task % nblk), bh = static_cast<int>(task / nblk);
    int b = bh / NH, h = bh % NH;
    int r0 = ib * kBlock, nr = std::min(kBlock, T - r0), ncols = r0 + nr;
    const float* q = qkv + (static_cast<size_t>(b) * T + r0) * C3 + h * hs;  // (nr, hs) ld 3C
    const float* k = qkv + static_cast<size_t>(b) * T * C3 + C + h * hs;    // (T, hs) ld 3C
    const float* v = k + C;                                                  // (T, hs) ld 3C
    float* p = att + (static_cast<size_t>(bh) * T + r0) * T;                 // (nr, T)
    float* o = out + (static_cast<size_t>(b) * T + r0) * C + h * hs;         // (nr, hs) ld C
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, nr, ncols, hs, scale, q, C3, k, C3, 0.0f, p, T);
    for (int r = 0; r < nr; r++) causal_softmax_row(p + static_cast<size_t>(r) * T, r0 + r, T);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, nr, hs, ncols, 1.0f, p, T, v, C3, 0.0f, o, C);
  }
}

namespace {

// One (b, h) head's backward. ds is (T, T) scratch; dq/dk/dv point into dqkv (ld 3C).
void attention_backward_head(float* dq, float* dk, float* dv, float* ds, const float* dO, const float* q,
                             const float* k, const float* v, const float* p, int T, int C, int hs,
                             float scale) {
  const int C3 = 3 * C, nblk = (T + kBlock - 1) / kBlock;
  for (int ib = 0; ib < nblk; ib++) {
    int r0 = ib * kBlock, nr = std::min(kBlock, T - r0), ncols = r0 + nr;
    float* dsb = ds + static_cast<size_t>(r0) * T;  // (nr, T), columns < ncols used
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, nr, ncols, hs, 1.0f, dO + static_cast<size_t>(r0) * C,
                C, v, C3, 0.0f, dsb, T);
    for (int r = 0; r < nr; r++) {
      int t = r0 + r;
      const float* pr = p + static_cast<size_t>(t) * T;  // (T)
      float* dr = dsb + static_cast<size_t>(r) * T;      // (T)
      float dot = 0.0f;
#pragma omp simd reduction(+ : dot)
      for (int j = 0; j <= t; j++) dot += pr[j] * dr[j];
#pragma omp simd
      for (int j = 0; j <= t; j++) dr[j] = pr[j] * (dr[j] - dot);
      std::fill(dr + t + 1, dr + ncols, 0.0f);
    }
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, nr, hs, ncols, scale, dsb, T, k, C3, 0.0f,
                dq + static_cast<size_t>(r0) * C3, C3);
  }
  // Key/value block jb collects from query rows c0..T-1 (rows above are masked: dS and P are 0 there).
  for (int jb = 0; jb < nblk; jb++) {
    int c0 = jb * kBlock, nc = std::min(kBlock, T - c0), nrows = T - c0;
    size_t at = static_cast<size_t>(c0) * T + c0;
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, nc, hs, nrows, scale, ds + at, T,
                q + static_cast<size_t>(c0) * C3, C3, 0.0f, dk + static_cast<size_t>(c0) * C3, C3);
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, nc, hs, nrows, 1.0f, p + at, T,
                dO + static_cast<size_t>(c0) * C, C, 0.0f, dv + static_cast<size_t>(c0) * C3, C3);
  }
}

}  // namespace

void attention_backward(float* dqkv, const float* dout, const float* qkv, const float* att, int B, int T, int C,
                        int NH) {
  GPT_CHECK(NH > 0 && C % NH == 0, "attention: channels ", C, " are not a multiple of the heads ", NH);
  const int hs = C / NH, C3 = 3 * C;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hs));
  BlasSerial serial;
#pragma omp parallel
  {
    std::vector<float> ds(static_cast<size_t>(T) * T);  // (T, T) per-thread scratch: dP, then dS
#pragma omp for schedule(dynamic)
    for (int bh = 0; bh < B * NH; bh++) {
      int b = bh / NH, h = bh % NH;
      size_t row0 = static_cast<size_t>(b) * T;
      const float* q = qkv + row0 * C3 + h * hs;  // (T, hs) ld 3C; k at +C, v at +2C
      float* dq = dqkv + row0 * C3 + h * hs;      // (T, hs) ld 3C; dk at +C, dv at +2C
      attention_backward_head(dq, dq + C, dq + 2 * C, ds.data(), dout + row0 * C + h * hs, q, q + C, q + 2 * C,
                              att + static_cast<size_t>(bh) * T * T, T, C, hs, scale);
    }
  }
}

namespace {

// dst (B,NH,Tmax,hs) at positions past..past+Tn-1 <- the (B,Tn) rows of src (ld 3C), head h in columns
// h*hs..h*hs+hs.
void append_heads(float* dst, const float* src, int B, int Tn, int past, int Tmax, int C, int NH) {
  const int hs = C / NH;
  for (int b = 0; b < B; b++)
    for (int t = 0; t < Tn; t++)
      for (int h = 0; h < NH; h++)
        std::copy_n(src + (static_cast<size_t>(b) * Tn + t) * 3 * C + h * hs, hs,
                    dst + ((static_cast<size_t>(b) * NH + h) * Tmax + past + t) * hs);
}

}  // namespace

// As attention_forward, with the keys and values read from the caches (ld hs) and row t of the new block
// at position past + t: row block ib needs key columns 0..past+(ib+1)*kBlock.
void attention_cached_forward(float* out, float* kcache, float* vcache, const float* qkv, int B, int Tn, int past,
                              int Tmax, int C, int NH) {
  GPT_CHECK(NH > 0 && C % NH == 0, "attention: channels ", C, " are not a multiple of the heads ", NH);
  GPT_CHECK(B >= 1 && Tn >= 1 && past >= 0 && past <= Tmax - Tn, "cached attention: positions ", past, "..",
            (long long)past + Tn - 1, " do not fit a cache of ", Tmax);
  const int hs = C / NH, C3 = 3 * C, nblk = (Tn + kBlock - 1) / kBlock;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hs));
  append_heads(kcache, qkv + C, B, Tn, past, Tmax, C, NH);
  append_heads(vcache, qkv + 2 * C, B, Tn, past, Tmax, C, NH);
  BlasSerial serial;
#pragma omp parallel
  {
    std::vector<float> scores(static_cast<size_t>(std::min(kBlock, Tn)) * (past + Tn));  // (nr, ncols) per thread
#pragma omp for schedule(dynamic)
    for (long task = 0; task < static_cast<long>(B) * NH * nblk; task++) {
      const int ib = static_cast<int>(task % nblk), bh = static_cast<int>(task / nblk);
      const int b = bh / NH, h = bh % NH;
      const int r0 = ib * kBlock, nr = std::min(kBlock, Tn - r0), ncols = past + r0 + nr;
      const float* q = qkv + (static_cast<size_t>(b) * Tn + r0) * C3 + h * hs;  // (nr, hs) ld 3C
      const float* k = kcache + static_cast<size_t>(bh) * Tmax * hs;             // (ncols, hs) ld hs
      const float* v = vcache + static_cast<size_t>(bh) * Tmax * hs;             // (ncols, hs) ld hs
      float* o = out + (static_cast<size_t>(b) * Tn + r0) * C + h * hs;          // (nr, hs) ld C
      float* p = scores.data();
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, nr, ncols, hs, scale, q, C3, k, hs, 0.0f, p, ncols);
      for (int r = 0; r < nr; r++) causal_softmax_row(p + static_cast<size_t>(r) * ncols, past + r0 + r, ncols);
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, nr, hs, ncols, 1.0f, p, ncols, v, hs, 0.0f, o, C);
    }
  }
}

}  // namespace gpt::cpu
