// CUDA optimizer-side ops against their CPU twins: AdamW, sum of squares, fp32 accumulation. All fp32, so the
// bounds are pure fp32 rounding (derivation: top of test_cuda_ops.cpp); the one bf16 value, AdamW's compute
// copy, must be the exact rounding of the kernel's own fp32 result. sum_squares_all (one host wait for many
// buffers) must equal the loop of sum_squares bit for bit.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "kernels/sizes.h"
#include "tests/cuda/twin_util.h"

namespace gpt::test {
namespace {

TEST_F(CudaTwin, AdamWMatchesTorchFormula) {
  const size_t n = 70001;
  Rng rng(301);
  auto p0 = uniform_f32(rng, n, -1, 1), grad = uniform_f32(rng, n, -1, 1);
  auto m0 = uniform_f32(rng, n, -0.1f, 0.1f), v0 = uniform_f32(rng, n, 1e-4f, 1e-2f);
  AdamWParams hp;
  hp.lr = 1e-3f, hp.beta1 = 0.9f, hp.beta2 = 0.95f, hp.eps = 1e-8f, hp.weight_decay = 0.1f;
  hp.grad_scale = 0.7f, hp.step = 5;
  // The step constants both twins derive on the host (double, rounded to float once), as torch does.
  const double bc1 = 1.0 - std::pow(static_cast<double>(hp.beta1), hp.step);
  const double bc2 = 1.0 - std::pow(static_cast<double>(hp.beta2), hp.step);
  const double step = static_cast<float>(hp.lr / bc1), bc2s = static_cast<float>(std::sqrt(bc2));
  const double decay = static_cast<float>(1.0 - static_cast<double>(hp.lr) * hp.weight_decay);
  const double b1 = hp.beta1, b2 = hp.beta2, eps = hp.eps;
  const double c1 = 1.0f - hp.beta1, c2 = 1.0f - hp.beta2;  // exact in fp32 (Sterbenz)
  std::vector<double> rp(n), rm(n), rv(n), tp(n), tm(n), tv(n);
  for (size_t i = 0; i < n; i++) {
    const double g = static_cast<double>(grad[i]) * hp.grad_scale;
    rm[i] = b1 * m0[i] + c1 * g;
    rv[i] = b2 * v0[i] + c2 * g * g;
    tm[i] = 2 * kU * (std::fabs(b1 * m0[i]) + std::fabs(c1 * g)) + kU * std::fabs(rm[i]);
    tv[i] = kU * b2 * v0[i] + 4 * kU * c2 * g * g + kU * rv[i];
    const double sq = std::sqrt(rv[i]) / bc2s, D = sq + eps, r = rm[i] / D, upd = step * r;
    rp[i] = p0[i] * decay - upd;
    const double eD = sq * (tv[i] / (2 * rv[i]) + 2 * kU) + kU * D;
    const double er = tm[i] / D + std::fabs(r) * (eD / D + kU);
    tp[i] = kU * std::fabs(p0[i] * decay) + step * er + kU * std::fabs(upd) + kU * std::fabs(rp[i]);
  }
  std::vector<float> p[2], m[2], v[2];
  Backend* bes[2] = {gpu.get(), cpu.get()};
  for (int k = 0; k < 2; k++) {
    Backend& be = *bes[k];
    DevBuf dp = upload_f32(be, p0), dg = upload_f32(be, grad), dm = upload_f32(be, m0), dv = upload_f32(be, v0);
    be.adamw_update(dp.f32(), dg.f32(), dm.f32(), dv.f32(), nullptr, n, hp);
    p[k] = download_f32(be, dp.get(), n);
    m[k] = download_f32(be, dm.get(), n);
    v[k] = download_f32(be, dv.get(), n);
  }
  expect_twins("adamw param", p[0], p[1], rp, tp, tp);
  expect_twins("adamw m", m[0], m[1], rm, tm, tm);
  expect_twins("adamw v", v[0], v[1], rv, tv, tv);
}

// AdamW with a compute-dtype output (Backend::adamw_update's param_out, the engine's compute copy): the
// fp32 param, m and v are bit-identical to the update without it, and the output holds exactly the bf16
// rounding (nearest even) of the updated fp32 params (cuda) or a copy of them (cpu). Segments start at
// element offsets 0 (the 16-byte vector path from the first element), 1 and 6 (elements peeled before
// the vectors), and with the output one bf16 off the params' alignment (the one-element path).
TEST_F(CudaTwin, AdamWComputeCopyIsTheRoundedParam) {
  const size_t n = 70001;
  Rng rng(304);
  auto p0 = uniform_f32(rng, n, -1, 1), grad = uniform_f32(rng, n, -1, 1);
  auto m0 = uniform_f32(rng, n, -0.1f, 0.1f), v0 = uniform_f32(rng, n, 1e-4f, 1e-2f);
  AdamWParams hp;
  hp.lr = 1e-3f, hp.weight_decay = 0.1f, hp.grad_scale = 0.7f, hp.step = 3;
  struct Case { size_t offset, out_shift; };
  for (const Case c : {Case{0, 0}, Case{1, 0}, Case{6, 0}, Case{4, 1}}) {
    const size_t len = n + c.offset;
    auto at = [&](const std::vector<float>& h) {
      std::vector<float> padded(c.offset, 0.0f);
      padded.insert(padded.end(), h.begin(), h.end());
      return padded;
    };
    for (Backend* be : {gpu.get(), cpu.get()}) {
      const bool bf16 = be->compute_dtype() == DType::BF16;
      std::vector<float> p[2], m[2], v[2];
      std::vector<uint16_t> out16(n);
      std::vector<float> out32;
      for (int with = 0; with < 2; with++) {
        DevBuf dp = upload_f32(*be, at(p0)), dg = upload_f32(*be, at(grad)), dm = upload_f32(*be, at(m0)),
               dv = upload_f32(*be, at(v0));
        DevBuf dout(*be, (len + c.out_shift) * be->compute_size());
        void* out = with ? static_cast<char*>(dout.get()) + (c.offset + c.out_shift) * be->compute_size() : nullptr;
        be->adamw_update(dp.f32() + c.offset, dg.f32() + c.offset, dm.f32() + c.offset, dv.f32() + c.offset, out, n,
                         hp);
        p[with] = download_f32(*be, dp.f32() + c.offset, n);
        m[with] = download_f32(*be, dm.f32() + c.offset, n);
        v[with] = download_f32(*be, dv.f32() + c.offset, n);
        if (with && bf16) {
          be->copy_d2h(out16.data(), out, n * sizeof(uint16_t));
          be->synchronize();
        } else if (with) {
          out32 = download_f32(*be, out, n);
        }
      }
      const std::string what = be->name() + " offset " + std::to_string(c.offset) + " out shift " +
                               std::to_string(c.out_shift);
      EXPECT_EQ(std::memcmp(p[0].data(), p[1].data(), n * 4), 0) << what << ": param differs with param_out";
      EXPECT_EQ(std::memcmp(m[0].data(), m[1].data(), n * 4), 0) << what << ": m differs with param_out";
      EXPECT_EQ(std::memcmp(v[0].data(), v[1].data(), n * 4), 0) << what << ": v differs with param_out";
      size_t bad = 0;
      for (size_t i = 0; i < n; i++) {
        if (bf16) {
          bad += bf16_widen(out16[i]) != round_bf16(p[1][i]);
        } else {
          uint32_t a, b;
          std::memcpy(&a, &out32[i], 4);
          std::memcpy(&b, &p[1][i], 4);
          bad += a != b;
        }
      }
      EXPECT_EQ(bad, 0u) << what << ": compute copy elements that are not the updated param";
    }
  }
}

TEST_F(CudaTwin, SumSquaresInDouble) {
  const size_t n = 100003;
  Rng rng(302);
  auto x = uniform_f32(rng, n, -2, 2);
  long double ref = 0;  // 64-bit significand: the reference's own error is ~n 2^-64, negligible
  for (float xi : x) ref += static_cast<long double>(xi) * xi;
  // Squares of floats are exact in double; an n-term double sum in any order errs by <= 2 n 2^-53 of the sum.
  const double tol = 2.0 * n * std::ldexp(1.0, -53) * static_cast<double>(ref);
  double got[2];
  Backend* bes[2] = {gpu.get(), cpu.get()};
  for (int k = 0; k < 2; k++) {
    DevBuf d = upload_f32(*bes[k], x);
    got[k] = bes[k]->sum_squares(d.f32(), n);
  }
  EXPECT_NEAR(got[0], static_cast<double>(ref), tol) << "cuda sum_squares";
  EXPECT_NEAR(got[1], static_cast<double>(ref), tol) << "cpu sum_squares";
  EXPECT_NEAR(got[0], got[1], 2 * tol) << "cuda vs cpu sum_squares";
}

// sum_squares_all over more buffers than one host copy holds (cuda::kSumSquaresSlots per chunk), of assorted
// lengths (empty, shorter than a vector, long) and alignments: bit-identical to the loop of sum_squares on
// the same backend (each buffer's sum is the same reduction, added in the same order), and the twins agree
// within the double-sum bound.
TEST_F(CudaTwin, SumSquaresAllEqualsTheLoop) {
  const int count = 2 * cuda::kSumSquaresSlots + 17;
  Rng rng(305);
  std::vector<size_t> offs, ns;
  size_t total = 0;
  for (int i = 0; i < count; i++) {
    const size_t n = i % 9 == 0 ? 0 : i % 5 == 0 ? 3 : i % 7 == 0 ? 70001 : 1 + (size_t)(rng.uniform() * 5000);
    offs.push_back(total + (size_t)(i % 3));  // misaligned starts too
    total += n + 3;
    ns.push_back(n);
  }
  const std::vector<float> x = uniform_f32(rng, total, -2, 2);
  long double ref = 0;  // every term is positive: the sum of |terms| is the sum
  for (int i = 0; i < count; i++)
    for (size_t k = 0; k < ns[i]; k++) ref += static_cast<long double>(x[offs[i] + k]) * x[offs[i] + k];
  const double tol = 2.0 * (double)total * std::ldexp(1.0, -53) * static_cast<double>(ref);
  double all[2];
  Backend* bes[2] = {gpu.get(), cpu.get()};
  for (int k = 0; k < 2; k++) {
    DevBuf d = upload_f32(*bes[k], x);
    std::vector<const float*> xs;
    for (int i = 0; i < count; i++) xs.push_back(d.f32() + offs[i]);
    double loop = 0.0;
    for (int i = 0; i < count; i++) loop += bes[k]->sum_squares(xs[i], ns[i]);
    all[k] = bes[k]->sum_squares_all(xs.data(), ns.data(), count);
    EXPECT_EQ(std::memcmp(&all[k], &loop, sizeof(double)), 0)
        << bes[k]->name() << ": sum_squares_all " << all[k] << " != the loop " << loop;
    EXPECT_EQ(bes[k]->sum_squares_all(xs.data(), ns.data(), 0), 0.0) << bes[k]->name();
  }
  EXPECT_NEAR(all[0], static_cast<double>(ref), tol) << "cuda sum_squares_all";
  EXPECT_NEAR(all[1], static_cast<double>(ref), tol) << "cpu sum_squares_all";
}

// y + x / d is a correctly rounded fp32 division and addition on any IEEE machine (x / 1 is x): the twins
// agree bit for bit, and with the reference computed in double and rounded to float after each operation
// (innocuous double rounding: 53 >= 2 x 24 + 2). The size passes the cap of the elementwise launch grid
// (65536 blocks of 256), so the grid-stride loop is exercised.
TEST_F(CudaTwin, AccumulateF32IsExact) {
  const size_t n = (size_t{1} << 24) + 4099;
  Rng rng(303);
  auto y0 = uniform_f32(rng, n, -1, 1), x = uniform_f32(rng, n, -1, 1);
  for (float d : {1.0f, 3.0f}) {
    std::vector<double> ref(n), zero(n, 0.0);
    for (size_t i = 0; i < n; i++)
      ref[i] = static_cast<float>(y0[i] + static_cast<double>(static_cast<float>(static_cast<double>(x[i]) / d)));
    std::vector<float> got[2];
    Backend* bes[2] = {gpu.get(), cpu.get()};
    for (int k = 0; k < 2; k++) {
      DevBuf dy = upload_f32(*bes[k], y0), dx = upload_f32(*bes[k], x);
      bes[k]->accumulate_f32(dy.f32(), dx.f32(), n, d);
      got[k] = download_f32(*bes[k], dy.get(), n);
    }
    expect_twins("accumulate_f32 / " + std::to_string((int)d), got[0], got[1], ref, zero, zero);
  }
}

}  // namespace
}  // namespace gpt::test
