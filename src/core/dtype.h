// Element types that cross the backend interface. The CPU backend computes in F32; the CUDA backend keeps
// activations and gathered parameters in BF16 and everything that accumulates (master weights, gradient
// shards, Adam moments, reductions) in F32.
#pragma once
#include <cstddef>

namespace gpt {

enum class DType { F32, BF16 };

inline size_t dtype_size(DType t) { return t == DType::F32 ? 4 : 2; }
inline const char* dtype_name(DType t) { return t == DType::F32 ? "f32" : "bf16"; }

}  // namespace gpt
