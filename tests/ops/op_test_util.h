// Helpers shared by the op tests: random inputs, float<->double copies, a tolerance check that names the
// first bad element, and central finite differences in double precision.
//
// How the op tests judge a float kernel: each test writes its own straightforward double-precision forward
// (the golden), and gets expected gradients by central differences of L(x) = sum(dout * forward(x)) in
// double with h = 1e-6. For O(1) inputs the finite-difference error is ~h^2 (truncation, 1e-12) plus
// ~1e-16 |L| / h (rounding, 1e-10 |L|), far below float precision, so the tolerance only has to cover the
// kernel's own float rounding; each test states its bound.
#pragma once
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "src/backend/backend.h"
#include "src/core/check.h"
#include "src/core/rng.h"

namespace gpt::test {

inline std::vector<float> randn(size_t n, uint64_t seed, double scale = 1.0, double shift = 0.0) {
  Rng rng(seed);
  std::vector<float> v(n);
  for (auto& x : v) x = static_cast<float>(shift + scale * rng.normal());
  return v;
}

inline std::vector<double> to_double(const std::vector<float>& v) { return {v.begin(), v.end()}; }

// |actual - expected| <= atol + rtol * |expected| for every element; reports the first failure.
inline ::testing::AssertionResult all_close(const std::vector<float>& actual, const std::vector<double>& expected,
                                            double atol, double rtol) {
  if (actual.size() != expected.size())
    return ::testing::AssertionFailure() << "size " << actual.size() << " vs " << expected.size();
  double worst = 0.0;
  for (size_t i = 0; i < actual.size(); i++) {
    double err = std::fabs(actual[i] - expected[i]);
    if (!(err <= atol + rtol * std::fabs(expected[i])))
      return ::testing::AssertionFailure() << "element " << i << ": got " << actual[i] << ", expected "
                                           << expected[i] << " (error " << err << ")";
    worst = std::max(worst, err);
  }
  return ::testing::AssertionSuccess() << "max error " << worst;
}

// |actual - expected| <= tol[i] for every element (per-element bounds derived by the test); reports the first
// failure.
inline ::testing::AssertionResult all_within(const std::vector<float>& actual, const std::vector<double>& expected,
                                             const std::vector<double>& tol) {
  if (actual.size() != expected.size() || tol.size() != expected.size())
    return ::testing::AssertionFailure() << "sizes " << actual.size() << ", " << expected.size() << ", " << tol.size();
  double worst = 0.0;  // the largest error / bound among the passing elements
  for (size_t i = 0; i < actual.size(); i++) {
    const double err = std::fabs(actual[i] - expected[i]);
    if (!(err <= tol[i]))
      return ::testing::AssertionFailure() << "element " << i << ": got " << actual[i] << ", expected " << expected[i]
                                           << " (error " << err << ", bound " << tol[i] << ")";
    if (tol[i] > 0) worst = std::max(worst, err / tol[i]);
  }
  return ::testing::AssertionSuccess() << "max error / bound " << worst;
}

// fp32 unit roundoff u = 2^-24, and Higham's gamma_n = n u / (1 - n u): a float sum of n + 1 terms, added in any
// order with round-to-nearest, is within gamma_n * sum |terms| of the exact sum; n roundings in a chain of
// products and quotients move a value by at most gamma_n relative.
constexpr double kUnitRoundoff = 1.0 / 16777216.0;
inline double gamma_n(double n) { return n * kUnitRoundoff / (1.0 - n * kUnitRoundoff); }

// Central difference dL/dx[i] where L reads x (double precision); x[i] is restored afterwards.
inline double central_diff(const std::function<double()>& L, std::vector<double>& x, size_t i,
                           double h = 1e-6) {
  double keep = x[i];
  x[i] = keep + h;
  double up = L();
  x[i] = keep - h;
  double down = L();
  x[i] = keep;
  return (up - down) / (2 * h);
}

// Finite-difference gradient of L with respect to every element of x.
inline std::vector<double> fd_gradient(const std::function<double()>& L, std::vector<double>& x) {
  std::vector<double> g(x.size());
  for (size_t i = 0; i < x.size(); i++) g[i] = central_diff(L, x, i);
  return g;
}

inline double dot(const std::vector<double>& a, const std::vector<double>& b) {
  double s = 0.0;
  for (size_t i = 0; i < a.size(); i++) s += a[i] * b[i];
  return s;
}

inline std::unique_ptr<Backend> cpu_backend() { return make_backend("cpu"); }

}  // namespace gpt::test
