// Element types that cross the backend interface. The CPU backend computes in F32; the CUDA backend keeps
// activations and gathered parameters in BF16 and everything that accumulates (master weights, gradient
// shards, Adam moments, reductions) in F32.
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstring>

namespace gpt {

enum class DType { F32, BF16 };

inline size_t dtype_size(DType t) { return t == DType::F32 ? 4 : 2; }
inline const char* dtype_name(DType t) { return t == DType::F32 ? "f32" : "bf16"; }

// fp32 -> bf16 bits, rounding to nearest even on the 16 dropped bits; NaN stays a (quiet) NaN. The host
// twin of the GPU's __float2bfloat16_rn (cpu backend conversions, MPI's bf16 sum).
inline uint16_t bf16_round(float x) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x0040u);
  return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

// bf16 bits -> fp32, exactly (bf16 is the top half of an fp32).
inline float bf16_widen(uint16_t h) {
  const uint32_t bits = (uint32_t)h << 16;
  float x;
  std::memcpy(&x, &bits, 4);
  return x;
}

}  // namespace gpt
