// Residual connection: out = a + b forward; backward adds a branch's input gradient into the residual
// stream's gradient (dstream += dbranch), which is how the model sums the two paths explicitly.
#include "kernels/cpu/ops.h"

namespace gpt::cpu {

void residual_forward(float* out, const float* a, const float* b, size_t n) {
  parallel_ranges(n, [=](size_t i0, size_t i1) {
#pragma omp simd
    for (size_t i = i0; i < i1; i++) out[i] = a[i] + b[i];
  });
}

void residual_backward(float* dstream, const float* dbranch, size_t n) {
  parallel_ranges(n, [=](size_t i0, size_t i1) {
#pragma omp simd
    for (size_t i = i0; i < i1; i++) dstream[i] += dbranch[i];
  });
}

}  // namespace gpt::cpu
