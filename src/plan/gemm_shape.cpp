// See gemm_shape.h.
#include "src/plan/gemm_shape.h"

#include <algorithm>
#include <cmath>

namespace gpt {

GemmShape calibration_gemm_shape(double mnk) {
  if (mnk < 256.0 * 64 * 64) {
    const int a = std::max(8, (int)std::lround(std::cbrt(mnk) / 8) * 8);
    return {a, a, a};
  }
  double nk = std::sqrt(mnk / 256);
  int m = 256;
  if (nk > 4096) {
    m = (int)std::lround(mnk / (4096.0 * 4096));
    nk = 4096;
  }
  const int a = std::max(16, (int)std::lround(nk / 16) * 16);
  return {m, a, a};
}

namespace {
double ends(double m, double n, double k, double edge) { return (1 + edge / m) * (1 + edge / n) * (1 + edge / k); }
}  // namespace

double gemm_shape_factor(double m, double n, double k, double edge) {
  if (edge <= 0 || m <= 0 || n <= 0 || k <= 0) return 1;
  const GemmShape f = calibration_gemm_shape(m * n * k);
  return ends(m, n, k, edge) / ends(f.m, f.n, f.k, edge);
}

double fit_gemm_edge(const std::vector<GemmSample>& samples, bool backward) {
  double best = 0, best_err = INFINITY;
  for (int q = 0; q <= 4 * 256; q++) {
    const double e = q / 4.0;
    double err = 0;
    for (const GemmSample& s : samples) {
      if (s.backward != backward || !(s.seconds > 0 && s.reference_seconds > 0)) continue;
      const double d = std::log(s.seconds / s.reference_seconds) -
                       std::log(gemm_shape_factor(s.shape.m, s.shape.n, s.shape.k, e));
      err += std::fabs(d);
    }
    if (err < best_err) best = e, best_err = err;
  }
  return best;
}

}  // namespace gpt
