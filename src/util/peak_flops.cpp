// A short fp32 sgemm calibration: the FLOP/s this CPU actually reaches with OpenBLAS, used as the
// "peak" for MFU on the cpu backend (a stated, measured peak rather than a datasheet number).
#include <cblas.h>

#include <vector>

#include "src/train/trainer.h"
#include "src/util/log.h"

namespace gpt {

double measure_cpu_peak_flops() {
  const int n = 768;
  std::vector<float> a((size_t)n * n, 0.5f), b((size_t)n * n, 0.25f), c((size_t)n * n, 0.0f);
  // Best of as many runs as fit in ~0.25 s (at least 4): the best run is the one least disturbed by other
  // processes. On a busy machine even that is low, and MFU then reads high: pass --peak-tflops instead.
  double best = 1e30;
  const double start = now_seconds();
  for (int rep = 0; rep < 4 || (rep < 200 && now_seconds() - start < 0.25); rep++) {
    double t0 = now_seconds();
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, n, n, 1.0f, a.data(), n, b.data(), n, 0.0f, c.data(), n);
    double dt = now_seconds() - t0;
    if (rep > 0 && dt < best) best = dt;  // first call warms up threads and caches
  }
  return 2.0 * n * n * n / best;
}

}  // namespace gpt
