// Helpers for the CUDA-vs-CPU twin tests: bf16 rounding on the host, device buffers owned by a backend,
// upload/download through the Backend interface only (so this compiles without CUDA), the error-bound
// constants of the derivation in test_cuda_ops.cpp, the three-way check (GPU vs reference, CPU vs
// reference, GPU vs CPU) that names the worst element, and the classifier's reference with its bounds.
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "src/backend/backend.h"
#include "src/core/rng.h"

namespace gpt::test {

constexpr double kU = 1.0 / 16777216.0;  // fp32 unit roundoff, 2^-24
constexpr double kUb = 1.0 / 256.0;      // bf16 unit roundoff, 2^-8 (8 significant bits)

// Bound on the error of a K-term fp32 sum in any order, relative to the sum of |terms|: gamma_K = K u / (1-K u)
// for round-to-nearest; doubled to allow additions that truncate (tensor-core accumulators may).
inline double acc(double K) { return 2.0 * K * kU / (1.0 - 2.0 * K * kU); }

// The GPU writes its fp32 result (error e from the exact value ref) rounded to bf16 once.
inline double bf16_out(double ref, double e) { return e + kUb * (std::fabs(ref) + e); }

// Round to the nearest bf16 (ties to even), as __float2bfloat16_rn does; inputs here are finite.
inline float round_bf16(float x) {
  uint32_t b;
  std::memcpy(&b, &x, 4);
  b += 0x7fffu + ((b >> 16) & 1u);
  b &= 0xffff0000u;
  float y;
  std::memcpy(&y, &b, 4);
  return y;
}

// Uniform in [lo, hi), already rounded to bf16: both backends then see exactly the same inputs.
inline std::vector<float> uniform_bf16(Rng& rng, size_t n, float lo, float hi) {
  std::vector<float> v(n);
  for (auto& x : v) x = round_bf16(lo + (hi - lo) * rng.uniform());
  return v;
}
inline std::vector<float> uniform_f32(Rng& rng, size_t n, float lo, float hi) {
  std::vector<float> v(n);
  for (auto& x : v) x = lo + (hi - lo) * rng.uniform();
  return v;
}

// A device buffer freed by its backend.
class DevBuf {
 public:
  DevBuf(Backend& be, size_t bytes, MemCat cat = MemCat::activation) : be_(&be), p_(be.alloc(bytes, cat)) {}
  DevBuf(DevBuf&& o) noexcept : be_(o.be_), p_(o.p_) { o.p_ = nullptr; }
  DevBuf(const DevBuf&) = delete;
  DevBuf& operator=(const DevBuf&) = delete;
  DevBuf& operator=(DevBuf&&) = delete;
  ~DevBuf() {
    if (p_) be_->free(p_);
  }
  void* get() const { return p_; }
  float* f32() const { return static_cast<float*>(p_); }
  int* i32() const { return static_cast<int*>(p_); }

 private:
  Backend* be_;
  void* p_;
};

inline DevBuf upload_f32(Backend& be, const std::vector<float>& h) {
  DevBuf d(be, h.size() * sizeof(float));
  be.copy_h2d(d.get(), h.data(), h.size() * sizeof(float));
  return d;
}

// Host fp32 values -> device buffer in the backend's compute dtype (via f32_to_compute).
inline DevBuf upload_compute(Backend& be, const std::vector<float>& h) {
  DevBuf tmp = upload_f32(be, h);
  DevBuf d(be, h.size() * be.compute_size());
  be.f32_to_compute(d.get(), tmp.f32(), h.size());
  be.synchronize();
  return d;
}

inline DevBuf upload_ints(Backend& be, const std::vector<int>& h) {
  DevBuf d(be, h.size() * sizeof(int));
  be.copy_h2d(d.get(), h.data(), h.size() * sizeof(int));
  return d;
}

inline std::vector<float> download_f32(Backend& be, const void* p, size_t n) {
  std::vector<float> h(n);
  be.copy_d2h(h.data(), p, n * sizeof(float));
  be.synchronize();
  return h;
}

inline std::vector<float> download_compute(Backend& be, const void* p, size_t n) {
  DevBuf tmp(be, n * sizeof(float));
  be.compute_to_f32(tmp.f32(), p, n);
  return download_f32(be, tmp.get(), n);
}

// An output buffer filled with NaN, so an element the op forgets to write fails the check.
inline DevBuf poisoned_compute(Backend& be, size_t n) {
  return upload_compute(be, std::vector<float>(n, std::numeric_limits<float>::quiet_NaN()));
}
inline DevBuf poisoned_f32(Backend& be, size_t n) {
  return upload_f32(be, std::vector<float>(n, std::numeric_limits<float>::quiet_NaN()));
}

// |got - want| <= tol element-wise (NaN fails); one failure naming the worst element and the count.
inline void expect_within(const std::string& what, const std::vector<float>& got,
                          const std::vector<double>& want, const std::vector<double>& tol) {
  ASSERT_EQ(got.size(), want.size()) << what;
  ASSERT_EQ(tol.size(), want.size()) << what;
  size_t bad = 0, worst = 0;
  double worst_ratio = 0.0, max_ratio = 0.0;  // max_ratio: how much of the bound the passing elements use
  for (size_t i = 0; i < got.size(); i++) {
    const double err = std::fabs(static_cast<double>(got[i]) - want[i]);
    const double ratio = tol[i] > 0 ? err / tol[i] : (err == 0 ? 0.0 : INFINITY);
    if (!(err <= tol[i])) {
      if (bad == 0 || !(ratio <= worst_ratio)) worst = i, worst_ratio = ratio;
      bad++;
    } else {
      max_ratio = std::max(max_ratio, ratio);
    }
  }
  std::printf("[  bound   ] %s: max |error| / bound = %.3g\n", what.c_str(), max_ratio);
  if (bad > 0)
    ADD_FAILURE() << what << ": " << bad << " of " << got.size() << " elements outside the bound; worst ["
                  << worst << "] got " << got[worst] << ", expected " << want[worst] << ", bound "
                  << tol[worst];
}

constexpr double kS2Pi = 0.7978845608028654;  // sqrt(2/pi)
constexpr double kCubic = 0.044715;

// Both twins compute gelu(x) = x * s, s = 1 / (1 + exp(-2u)), u = sqrt(2/pi) (x + 0.044715 x^3): u costs five
// roundings of quantities <= sqrt(2/pi) (|x| + 0.044715 |x|^3), and s moves by ds/du = 2 s (1 - s) per unit of
// u, plus 6u of its own (exp 4u, one addition, one division).
struct GeluBound {
  double s, ds;
  explicit GeluBound(double x) {
    const double u = kS2Pi * (x + kCubic * x * x * x);
    const double du = 5 * kU * kS2Pi * (std::fabs(x) + kCubic * std::fabs(x * x * x));
    s = 1.0 / (1.0 + std::exp(-2 * u));
    ds = 2 * s * (1 - s) * du + 6 * kU * s;
  }
};

// One output element of a linear layer, ref = sum (K products of bf16 inputs, exact in fp32) + bias, the
// bound every matmul test uses (test_cuda_ops.cpp, test_cuda_matmul_gelu.cpp):
//  - cpu: the bias is the fp32 accumulator's starting value, so one sum of K + 1 terms: acc(K+1) (sum|x w| + |b|).
//  - gpu without a bias: the same fp32 accumulation (tensor cores), then the output's bf16 rounding.
//  - gpu with a bias, either path: the bias epilogue may round the product to bf16 before it adds the bias,
//    and the fallback (OC % 8 != 0 or an unaligned bias) stores the product as bf16 and adds the bias in an
//    fp32 kernel. Both are one more rounding of the product, ub |sum + e|, and one fp32 addition, u |ref|,
//    before the output's own bf16 rounding.
struct LinearBound {
  double cpu, gpu;
};
inline LinearBound linear_bound(int K, double sum, double abs_sum, double bias, bool has_bias) {
  const double ref = sum + bias;
  const double e = acc(K + (has_bias ? 1 : 0)) * (abs_sum + std::fabs(bias));
  const double e_gpu = has_bias ? e + kUb * (std::fabs(sum) + e) + kU * std::fabs(ref) : e;
  return {e, bf16_out(ref, e_gpu)};
}

// A bf16 copy of `h` that starts `offset` elements into its device buffer: with an odd offset the buffer is
// not 16-byte aligned, which sends the CUDA ops down their one-element-at-a-time paths.
struct OffsetBuf {
  DevBuf buf;
  size_t byte_offset;
  void* get() const { return static_cast<char*>(buf.get()) + byte_offset; }
};
inline OffsetBuf upload_compute_at(Backend& be, const std::vector<float>& h, size_t offset) {
  std::vector<float> padded(offset, 0.0f);
  padded.insert(padded.end(), h.begin(), h.end());
  DevBuf tmp = upload_f32(be, padded);
  DevBuf d(be, padded.size() * be.compute_size());
  be.f32_to_compute(d.get(), tmp.f32(), padded.size());
  be.synchronize();
  return {std::move(d), offset * be.compute_size()};
}

// The twin check: GPU vs reference (GPU bound), CPU vs reference (CPU bound), GPU vs CPU (sum of both).
inline void expect_twins(const std::string& what, const std::vector<float>& gpu, const std::vector<float>& cpu,
                         const std::vector<double>& ref, const std::vector<double>& tol_gpu,
                         const std::vector<double>& tol_cpu) {
  expect_within(what + " (cuda vs reference)", gpu, ref, tol_gpu);
  expect_within(what + " (cpu vs reference)", cpu, ref, tol_cpu);
  std::vector<double> cpu_d(cpu.begin(), cpu.end()), both(ref.size());
  for (size_t i = 0; i < ref.size(); i++) both[i] = tol_gpu[i] + tol_cpu[i];
  expect_within(what + " (cuda vs cpu)", gpu, cpu_d, both);
}

// ---- the classifier's reference: the whole op (test_cuda_pointwise.cpp) and its vocab-parallel passes run as a
// group (test_cuda_tensor_parallel.cpp), whose sum over the V columns is added in another order, which acc(V) covers.
// Per row: M = max x_j, S = sum_j exp(x_j - M) over j < V. Each exponential carries 4u of its own: the CPU's
// fast_exp, and the GPU's exp2f((x_j - M) log2 e) (2 ulp); the argument carries u|x_j - M| (the subtraction) on
// the CPU and 3u|x_j - M| on the GPU (the subtraction, the rounded log2 e and the product). S adds acc(V);
// log(S) moves by that relative error plus 4u |log S|, and the two additions of the loss add u each.
// dlogits_j = dloss (p_j - [j == t]) with p_j = exp(x_j - M) / S. The training pass also adds the losses to a
// running fp64 total: its bound is the sum of the losses' bounds (the fp64 additions are negligible).
struct ClassifierCase {
  int N, V, Vp;
  float dloss;
  std::vector<float> logits;
  std::vector<int> targets;
  std::vector<double> loss, tloss_c, tloss_g, dl, tdl_c, tdl_g;

  ClassifierCase(uint64_t seed, int N_ = 13, int V_ = 997, int Vp_ = 1024) : N(N_), V(V_), Vp(Vp_), dloss(1.0f / N_) {
    Rng rng(seed);
    logits = uniform_bf16(rng, static_cast<size_t>(N) * Vp, -4, 4);
    for (int i = 0; i < N; i++)  // padding holds large values: any leak into the softmax shows at once
      for (int j = V; j < Vp; j++) logits[static_cast<size_t>(i) * Vp + j] = 50.0f;
    targets.resize(N);
    for (auto& t : targets) t = static_cast<int>(rng.next_u64() % V);
    targets[0] = 0, targets[1] = V - 1;
    loss.resize(N), tloss_c.resize(N), tloss_g.resize(N);
    dl.assign(logits.size(), 0.0), tdl_c.assign(logits.size(), 0.0), tdl_g.assign(logits.size(), 0.0);
    for (int i = 0; i < N; i++) reference_row(i);
  }

  void reference_row(int i) {
    const float* x = &logits[static_cast<size_t>(i) * Vp];
    const double M = *std::max_element(x, x + V);
    double S = 0, e_max_c = 0, e_max_g = 0;
    for (int j = 0; j < V; j++) {
      S += std::exp(x[j] - M);
      e_max_c = std::max(e_max_c, 4 * kU + kU * std::fabs(x[j] - M));
      e_max_g = std::max(e_max_g, 4 * kU + 3 * kU * std::fabs(x[j] - M));
    }
    const double logS = std::log(S);
    loss[i] = logS + M - x[targets[i]];
    const double eS_c = acc(V) + e_max_c, eS_g = acc(V) + e_max_g;
    auto tloss = [&](double eS) { return eS + 4 * kU * std::fabs(logS) + kU * std::fabs(logS + M) + kU * std::fabs(loss[i]); };
    tloss_c[i] = tloss(eS_c), tloss_g[i] = tloss(eS_g);
    for (int j = 0; j < V; j++) {
      const size_t k = static_cast<size_t>(i) * Vp + j;
      const double p = std::exp(x[j] - M) / S, hot = j == targets[i] ? 1.0 : 0.0;
      dl[k] = dloss * (p - hot);
      auto tdl = [&](double e_exp, double eS) {
        const double ep = p * (e_exp + eS + 2 * kU);
        return dloss * (ep + kU * std::fabs(p - hot)) + 2 * kU * std::fabs(dl[k]);
      };
      tdl_c[k] = tdl(4 * kU + kU * std::fabs(x[j] - M), eS_c);
      tdl_g[k] = bf16_out(dl[k], tdl(4 * kU + 3 * kU * std::fabs(x[j] - M), eS_g));
    }  // padded columns: exactly 0 on both, bound 0
  }
};

// Fixture: skips without a GPU, else holds one backend of each kind.
class CudaTwin : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!gpt::cuda_available()) GTEST_SKIP() << "no CUDA GPU visible";
    gpu = make_backend("cuda");
    cpu = make_backend("cpu");
  }
  std::unique_ptr<Backend> gpu, cpu;
};

}  // namespace gpt::test
