// A product's speed depends on its shape, not on M*N*K alone. Why it matters: a hardware file rates products
// on a curve of flop/s against M*N*K, measured on one family of shapes (calibration_gemm_shape); a product
// with a short side runs slower than that family's shape of the same M*N*K. On a 2-core EPYC with OpenBLAS,
// GPT-2's classifier at d2 (256 tokens, C = 128, 50304 outputs) runs forward at 0.84x and backward at 0.81x
// of the curve, and a side of 32 against two of 2048 at about half the rate of three long sides.
//
// The model: a side of d elements runs at d / (d + e) of a long one, e (the profile's `gemm_edge`, in
// elements; `gemm_backward_edge` for the backward call) being what its ends cost (the packing and the
// partial tiles of the BLAS kernel), the same for the three sides. A product is priced at the curve's rate
// times the family shape's efficiency over its own (gemm_shape_factor), so at the family's shapes the curve
// is read as measured, and a file without an edge prices as before. `gpt bench --calibrate` times 10
// products with a short side, each alternated call by call with the family's shape of the same M*N*K, and
// fits e (fit_gemm_edge). A steeper form, 1 / (1 + (e/d)^p) with p fitted too, was tried: the calibration's
// samples chose p = 1 every time, so the one number stays.
#pragma once
#include <vector>

namespace gpt {

// (m, k) @ (k, n): m rows, k the reduction, n outputs. Which side is which does not enter the model.
struct GemmShape {
  int m = 0, n = 0, k = 0;
  double mnk() const { return (double)m * n * k; }
};

// The shape the calibration measures the curve on at this M*N*K: cubes below 256*64*64, then 256 rows (the
// usual B*T) with the two other sides growing together, then more rows once those pass 4096.
GemmShape calibration_gemm_shape(double mnk);

// Seconds of a product of sides (m, n, k) over the seconds the curve gives at its M*N*K:
// prod over the sides of (1 + e/d), over the same product for calibration_gemm_shape(m*n*k).
// 1 when e is 0 or a side is unknown (0).
double gemm_shape_factor(double m, double n, double k, double edge);

// One product with a short side, timed beside the calibration's own shape of the same M*N*K (the same call:
// forward or backward), the two alternated call by call.
struct GemmSample {
  GemmShape shape;
  bool backward = false;         // matmul_backward (dinp and dw), else the forward product
  double seconds = 0;            // per call
  double reference_seconds = 0;  // per call of calibration_gemm_shape(shape.mnk())
};

// The edge that best explains the time of the samples of one call (forward or backward) over their
// references' (least absolute deviations in log time, so that one pair a busy moment disturbed does not
// move it), searched over 0..256 elements (the family's shortest side above its cubes) in steps of 1/4.
double fit_gemm_edge(const std::vector<GemmSample>& samples, bool backward);

}  // namespace gpt
