// Ring-algorithm byte accounting shared by the communicators (mpi, nccl): what one rank sends for each
// collective, as NCCL's ring algorithms move it and as the ZeRO paper counts it. N is the group size, c the
// element count named in the call, s the element size in bytes.
//   all_gather     (c per rank in, N*c out):  c*s*(N-1)        = S*(N-1)/N with S = N*c*s gathered bytes
//   reduce_scatter (N*c in, c per rank out):  c*s*(N-1)        = S*(N-1)/N with S = N*c*s input bytes
//   all_reduce     (c in place):              2*c*s*(N-1)/N    (reduce-scatter + all-gather of S = c*s)
//   broadcast      (b bytes from the root):   b*(N-1)/N        (pipelined ring: N-1 of the N ranks forward
//                                                               all b bytes; the figure is the mean per rank)
// The first two are exact integers. all_reduce and broadcast are exact when N divides 2*c*s (resp. b),
// which FSDP guarantees by padding every unit to a multiple of the world size; otherwise the figure is
// rounded down (integer division in 64 bits), a per-rank mean of chunks that the ring splits unevenly.
// World size 1 moves nothing: every formula gives 0.
#pragma once
#include <cstddef>
#include <cstdint>

#include "src/core/dtype.h"

namespace gpt {

inline int64_t ring_all_gather_bytes(size_t count, DType dt, int world) {
  return static_cast<int64_t>(count) * static_cast<int64_t>(dtype_size(dt)) * (world - 1);
}

inline int64_t ring_reduce_scatter_bytes(size_t count, DType dt, int world) {
  return static_cast<int64_t>(count) * static_cast<int64_t>(dtype_size(dt)) * (world - 1);
}

inline int64_t ring_all_reduce_bytes(size_t count, DType dt, int world) {
  return 2 * static_cast<int64_t>(count) * static_cast<int64_t>(dtype_size(dt)) * (world - 1) / world;
}

inline int64_t ring_broadcast_bytes(size_t bytes, int world) {
  return static_cast<int64_t>(bytes) * (world - 1) / world;
}

}  // namespace gpt
