// Inputs and closed-form ledger figures shared by the communicator tests (MPI and NCCL).
#pragma once
#include <cstddef>
#include <cstdint>

namespace gpt::test {

// Element i of rank q's input: distinct per rank and per index, exact in f32, sums exact too.
inline float val(int q, size_t i) { return 1000.0f * q + static_cast<float>(i) + 0.5f; }

// Closed-form ring volumes (bytes one rank sends), N = group size, s = element bytes.
inline int64_t ag_bytes(int64_t c, int64_t s, int64_t n) { return c * s * (n - 1); }
inline int64_t ar_bytes(int64_t c, int64_t s, int64_t n) { return 2 * c * s * (n - 1) / n; }

}  // namespace gpt::test
