// WMMA for the SIMT emulator (simt.h): nvcuda::wmma's load, fill, mma and store on 16x16x16 tiles with bf16
// operands and fp32 accumulators, the subset the fused attention uses. Why it can be emulated exactly: a
// fragment's layout across lanes is unspecified, so correct code only moves whole tiles through these
// warp-wide calls; here every lane holds the whole tile (its own copy, the same values) and every call first
// converges the warp, as the _sync in the names requires of a GPU. The rules CUDA states are checked: all
// pointers 256-bit aligned, ldm a multiple of 16 bytes.
#pragma once
#include <cuda_bf16.h>

#include <cstdint>
#include <type_traits>

namespace nvcuda::wmma {

struct matrix_a {};
struct matrix_b {};
struct accumulator {};
struct row_major {};
struct col_major {};
enum layout_t { mem_row_major, mem_col_major };

// A tile of Use (matrix_a: M x K, matrix_b: K x N, accumulator: M x N), element (r, c) at x[r * cols + c].
template <typename Use, int M, int N, int K, typename T, typename Layout = void>
struct fragment {
  static constexpr int rows = std::is_same_v<Use, matrix_b> ? K : M;
  static constexpr int cols = std::is_same_v<Use, matrix_a> ? K : N;
  static constexpr int num_elements = rows * cols;
  float x[num_elements];
};

namespace detail {
inline void check(const void* p, unsigned ldm, size_t elem_bytes) {
  if (reinterpret_cast<uintptr_t>(p) % 32 != 0) simt::fault("wmma: a tile pointer is not 256-bit aligned");
  if ((ldm * elem_bytes) % 16 != 0) simt::fault("wmma: ldm is not a multiple of 16 bytes");
}
inline float value(float v) { return v; }
inline float value(__nv_bfloat16 v) { return __bfloat162float(v); }
// Element (r, c) of a rows x cols tile stored row-major (row stride ldm) or column-major (column stride ldm).
template <typename F, typename T>
void load(F& f, const T* p, unsigned ldm, bool row_major) {
  check(p, ldm, sizeof(T));
  simt::syncwarp(0xffffffffu);
  for (int r = 0; r < F::rows; r++)
    for (int c = 0; c < F::cols; c++)
      f.x[r * F::cols + c] =
          value(row_major ? p[static_cast<size_t>(r) * ldm + c] : p[static_cast<size_t>(c) * ldm + r]);
}
}  // namespace detail

template <typename Use, int M, int N, int K, typename T, typename Layout>
void load_matrix_sync(fragment<Use, M, N, K, T, Layout>& f, const T* p, unsigned ldm) {
  detail::load(f, p, ldm, std::is_same_v<Layout, row_major>);
}
template <int M, int N, int K>
void load_matrix_sync(fragment<accumulator, M, N, K, float>& f, const float* p, unsigned ldm, layout_t layout) {
  detail::load(f, p, ldm, layout == mem_row_major);
}
template <typename Use, int M, int N, int K, typename T, typename Layout>
void fill_fragment(fragment<Use, M, N, K, T, Layout>& f, float v) {
  simt::syncwarp(0xffffffffu);
  for (float& e : f.x) e = v;
}
// d = a b + c, each output a 16-term fp32 sum of exact products (bf16 x bf16 fits in fp32) added to c.
template <int M, int N, int K, typename LA, typename LB>
void mma_sync(fragment<accumulator, M, N, K, float>& d, const fragment<matrix_a, M, N, K, __nv_bfloat16, LA>& a,
              const fragment<matrix_b, M, N, K, __nv_bfloat16, LB>& b, const fragment<accumulator, M, N, K, float>& c) {
  simt::syncwarp(0xffffffffu);
  float out[M * N];
  for (int m = 0; m < M; m++)
    for (int n = 0; n < N; n++) {
      float s = 0.0f;
      for (int k = 0; k < K; k++) s += a.x[m * K + k] * b.x[k * N + n];
      out[m * N + n] = c.x[m * N + n] + s;
    }
  for (int i = 0; i < M * N; i++) d.x[i] = out[i];
}
template <int M, int N, int K>
void store_matrix_sync(float* p, const fragment<accumulator, M, N, K, float>& f, unsigned ldm, layout_t layout) {
  detail::check(p, ldm, sizeof(float));
  simt::syncwarp(0xffffffffu);
  for (int r = 0; r < M; r++)
    for (int c = 0; c < N; c++)
      (layout == mem_row_major ? p[static_cast<size_t>(r) * ldm + c] : p[static_cast<size_t>(c) * ldm + r]) =
          f.x[r * N + c];
}

}  // namespace nvcuda::wmma
