// The key under which the CUDA backend caches one cuBLASLt product (its descriptors and the algorithm the
// heuristic picked): everything that changes the descriptors or the heuristic's answer, and nothing that
// changes per call. Pointers change per call (activations, gather slots), so they are not in the key; their
// alignment is, because the heuristic is told each operand's alignment and may pick an algorithm that needs
// it. Plain C++ (no CUDA types), so the host tests can check it without a GPU.
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>

namespace gpt::cuda {

// Row-major terms of GemmSpec (ops.cuh): shape, strides, transposes, batch, output dtype, bias, beta == 0,
// the epilogue (bias, GELU, DGELU) and the byte alignments (power of two, at most 256) of A, B, C/D, the
// bias and the epilogue's auxiliary matrix.
struct GemmKey {
  int M = 0, N = 0, K = 0;
  int lda = 0, ldb = 0, ldc = 0;
  bool trans_a = false, trans_b = false;
  int batch = 1;
  long long stride_a = 0, stride_b = 0, stride_c = 0;
  bool c_f32 = false;
  bool bias = false;
  bool beta_zero = true;
  bool gelu = false;   // GELU epilogue with an auxiliary output (the pre-activation)
  bool dgelu = false;  // DGELU epilogue with an auxiliary input (the GELU's input)
  uint32_t align_a = 256, align_b = 256, align_c = 256, align_bias = 256, align_aux = 256;

  bool operator==(const GemmKey& o) const {
    return M == o.M && N == o.N && K == o.K && lda == o.lda && ldb == o.ldb && ldc == o.ldc &&
           trans_a == o.trans_a && trans_b == o.trans_b && batch == o.batch && stride_a == o.stride_a &&
           stride_b == o.stride_b && stride_c == o.stride_c && c_f32 == o.c_f32 && bias == o.bias &&
           beta_zero == o.beta_zero && align_a == o.align_a && align_b == o.align_b && align_c == o.align_c &&
           align_bias == o.align_bias && gelu == o.gelu && dgelu == o.dgelu && align_aux == o.align_aux;
  }
  bool operator!=(const GemmKey& o) const { return !(*this == o); }
};

struct GemmKeyHash {
  size_t operator()(const GemmKey& k) const {
    uint64_t h = 1469598103934665603ull;  // FNV-1a over the fields, one 64-bit word each
    auto mix = [&h](uint64_t v) {
      for (int i = 0; i < 8; i++) {
        h ^= (v >> (8 * i)) & 0xffu;
        h *= 1099511628211ull;
      }
    };
    const int64_t ints[] = {k.M, k.N, k.K, k.lda, k.ldb, k.ldc, k.batch, k.stride_a, k.stride_b, k.stride_c};
    for (int64_t v : ints) mix(static_cast<uint64_t>(v));
    mix((uint64_t{k.trans_a} << 0) | (uint64_t{k.trans_b} << 1) | (uint64_t{k.c_f32} << 2) |
        (uint64_t{k.bias} << 3) | (uint64_t{k.beta_zero} << 4) | (uint64_t{k.gelu} << 5) |
        (uint64_t{k.dgelu} << 6));
    mix((uint64_t{k.align_a} << 48) | (uint64_t{k.align_b} << 32) | (uint64_t{k.align_c} << 16) | k.align_bias);
    mix(k.align_aux);
    return static_cast<size_t>(h);
  }
};

// Largest power of two (<= 256) dividing the address of every batch's matrix: the address itself and, with
// more than one batch, the stride in bytes. 256 for a null pointer with batch 1 (no operand: no constraint).
inline uint32_t operand_alignment(uintptr_t address, long long stride_elems, size_t elem_bytes, int batch) {
  uint64_t bits = address;
  if (batch > 1) bits |= static_cast<uint64_t>(stride_elems) * elem_bytes;
  uint32_t a = 256;
  while (a > 1 && (bits % a) != 0) a /= 2;
  return a;
}

}  // namespace gpt::cuda
