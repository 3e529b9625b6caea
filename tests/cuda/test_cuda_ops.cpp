// CUDA ops against their CPU twins: encoder, layernorm (and its residual fusions), matmul (the other ops:
// test_cuda_pointwise.cpp, test_cuda_optim.cpp, test_cuda_attention.cpp, test_cuda_matmul_gelu.cpp). Shapes
// are chosen so each op runs both its 16-byte vector path and its one-element path. Every test skips when no GPU is visible and uses only the
// Backend interface (make_backend("cuda") vs make_backend("cpu")), so this file builds without CUDA.
//
// How the tolerances are derived (not tuned):
//  - Inputs are drawn in fp32 and rounded to bf16 on the host, so the bf16 GPU inputs and the fp32 CPU
//    inputs are the same numbers. fp32-only inputs (accumulated gradients, statistics) are shared too.
//  - The reference is a naive double-precision loop over those numbers (its own error, ~1e-16 relative,
//    is negligible). Each backend must land within its own bound of it, and the two backends within the
//    sum of both bounds of each other (the twin check).
//  - With u = 2^-24 (fp32) and ub = 2^-8 (bf16): one fp32 operation has relative error <= u; exp, log,
//    sqrt and division, on either backend (CUDA's expf, the CPU's fast_exp), <= 4u; a K-term fp32 sum in
//    any order (sequential, blocked, tree, tensor-core blocks) has |error| <= acc(K) * sum|terms| with
//    acc(K) = 2Ku/(1-2Ku), twice Higham's gamma_K so that accumulators which truncate are covered. Products
//    of two bf16 numbers are exact in fp32 (8 + 8 significant bits).
//  - Every bf16 value the GPU writes is the fp32 result rounded once: |error| grows by ub * (|ref| + e).
//    bf16 intermediates (attention) are relative perturbations of ub carried through first-order bounds.
//  - The bounds are first order in u (terms of u^2 are below 1e-13 relative here) and computed per element
//    from the reference's own magnitudes (|ref|, sum of |terms|), so they hold for any random draw.
#include <cmath>
#include <string>
#include <vector>

#include "tests/cuda/twin_util.h"

namespace gpt::test {
namespace {

// ---- encoder --------------------------------------------------------------------------------------------
// C % 8 == 0 takes the 16-byte vector path, other widths the one-element path.
void check_encoder_forward(Backend& gpu, Backend& cpu, int C, uint64_t seed) {
  const int B = 3, T = 17, Vp = 64, maxT = 32;
  Rng rng(seed);
  auto wte = uniform_bf16(rng, static_cast<size_t>(Vp) * C, -1, 1);
  auto wpe = uniform_bf16(rng, static_cast<size_t>(maxT) * C, -1, 1);
  std::vector<int> tok(B * T);
  for (auto& t : tok) t = static_cast<int>(rng.next_u64() % Vp);
  const size_t n = static_cast<size_t>(B) * T * C;
  std::vector<double> ref(n), tc(n), tg(n);
  for (int bt = 0; bt < B * T; bt++)
    for (int c = 0; c < C; c++) {
      const size_t i = static_cast<size_t>(bt) * C + c;
      ref[i] = static_cast<double>(wte[tok[bt] * C + c]) + wpe[(bt % T) * C + c];
      tc[i] = kU * std::fabs(ref[i]);  // one fp32 addition
      tg[i] = bf16_out(ref[i], tc[i]);
    }
  auto run = [&](Backend& be) {
    DevBuf dw = upload_compute(be, wte), dp = upload_compute(be, wpe), dt = upload_ints(be, tok);
    DevBuf out = poisoned_compute(be, n);
    be.encoder_forward(out.get(), dt.i32(), dw.get(), dp.get(), B, T, C);
    return download_compute(be, out.get(), n);
  };
  expect_twins("encoder_forward out C=" + std::to_string(C), run(gpu), run(cpu), ref, tg, tc);
}

TEST_F(CudaTwin, EncoderForward) {
  check_encoder_forward(*gpu, *cpu, 40, 101);  // vector path
  check_encoder_forward(*gpu, *cpu, 36, 111);  // one element at a time
}

// The backward groups positions by token (a counting sort on the GPU) and sums each group in position order:
// B*T = 400 positions span several tiles of the rank kernel, and 5 token ids make large groups. The GPU must
// repeat its result bit for bit (no atomics).
void check_encoder_backward(Backend& gpu, Backend& cpu, int B, int T, int C, uint64_t seed) {
  const int Vp = 16, maxT = T + 5;
  Rng rng(seed);
  auto dout = uniform_bf16(rng, static_cast<size_t>(B) * T * C, -1, 1);
  auto dwte0 = uniform_f32(rng, static_cast<size_t>(Vp) * C, -1, 1);
  auto dwpe0 = uniform_f32(rng, static_cast<size_t>(maxT) * C, -1, 1);
  std::vector<int> tok(B * T);
  for (auto& t : tok) t = static_cast<int>(rng.next_u64() % 5);  // few ids: many rows share a token
  std::vector<double> rte(dwte0.begin(), dwte0.end()), ate(rte.size()), rpe(dwpe0.begin(), dwpe0.end()),
      ape(rpe.size());
  std::vector<int> count_te(Vp, 1), count_pe(maxT, 1);  // the initial value is a term too
  for (size_t i = 0; i < ate.size(); i++) ate[i] = std::fabs(rte[i]);
  for (size_t i = 0; i < ape.size(); i++) ape[i] = std::fabs(rpe[i]);
  for (int bt = 0; bt < B * T; bt++) {
    count_te[tok[bt]]++;
    count_pe[bt % T]++;
    for (int c = 0; c < C; c++) {
      const double d = dout[static_cast<size_t>(bt) * C + c];
      rte[tok[bt] * C + c] += d, ate[tok[bt] * C + c] += std::fabs(d);
      rpe[(bt % T) * C + c] += d, ape[(bt % T) * C + c] += std::fabs(d);
    }
  }
  std::vector<double> tte(rte.size()), tpe(rpe.size());
  for (size_t i = 0; i < tte.size(); i++) tte[i] = acc(count_te[i / C]) * ate[i];
  for (size_t i = 0; i < tpe.size(); i++) tpe[i] = acc(count_pe[i / C]) * ape[i];
  std::vector<float> te[3], pe[3];
  Backend* bes[3] = {&gpu, &cpu, &gpu};
  for (int k = 0; k < 3; k++) {
    Backend& be = *bes[k];
    DevBuf dd = upload_compute(be, dout), dt = upload_ints(be, tok);
    DevBuf gte = upload_f32(be, dwte0), gpe = upload_f32(be, dwpe0);
    be.encoder_backward(gte.f32(), gpe.f32(), dd.get(), dt.i32(), B, T, C);
    te[k] = download_f32(be, gte.get(), dwte0.size());
    pe[k] = download_f32(be, gpe.get(), dwpe0.size());
  }
  const std::string tag = " B=" + std::to_string(B) + " T=" + std::to_string(T) + " C=" + std::to_string(C);
  expect_twins("encoder_backward dwte" + tag, te[0], te[1], rte, tte, tte);  // fp32 outputs: same bound
  expect_twins("encoder_backward dwpe" + tag, pe[0], pe[1], rpe, tpe, tpe);
  EXPECT_EQ(te[0], te[2]) << "encoder_backward dwte must repeat bit for bit" << tag;
  EXPECT_EQ(pe[0], pe[2]) << "encoder_backward dwpe must repeat bit for bit" << tag;
}

TEST_F(CudaTwin, EncoderBackwardAccumulatesDeterministically) {
  check_encoder_backward(*gpu, *cpu, 4, 19, 36, 102);   // one element at a time, one tile
  check_encoder_backward(*gpu, *cpu, 8, 50, 40, 112);   // vector path, four tiles
  check_encoder_backward(*gpu, *cpu, 3, 131, 24, 122);  // B*T not a multiple of the tile
  // d12's step shape: the rank kernel at B*T = 16384 positions, groups of about 3300 rows summed by one block
  check_encoder_backward(*gpu, *cpu, 16, 1024, 768, 132);
}

// ---- layernorm ------------------------------------------------------------------------------------------
// residual: the fused op's inputs a, b lie on a grid (multiples of 1/16 below 4 in size) so that a + b is
// exact in bf16 and fp32 alike: both backends then normalise the same numbers and the layernorm bounds hold
// unchanged; res must equal a + b exactly on both.
void check_layernorm_forward(Backend& gpu, Backend& cpu, int N, int C, bool residual, uint64_t seed) {
  Rng rng(seed);
  std::vector<float> x = uniform_bf16(rng, static_cast<size_t>(N) * C, -1.7f, 2.3f), a, b;
  if (residual) {
    auto grid = [&] { return static_cast<float>(static_cast<int>(rng.next_u64() % 96) - 40) / 16.0f; };
    a.resize(x.size()), b.resize(x.size());
    for (size_t i = 0; i < x.size(); i++) a[i] = grid(), b[i] = grid(), x[i] = a[i] + b[i];
  }
  auto w = uniform_bf16(rng, C, 0.5f, 1.5f);
  auto bias = uniform_bf16(rng, C, -0.5f, 0.5f);
  const double eps = 1e-5f;
  std::vector<double> rout(x.size()), tout_c(x.size()), tout_g(x.size()), rmean(N), tmean(N), rrstd(N),
      trstd(N);
  for (int i = 0; i < N; i++) {
    const float* xi = &x[static_cast<size_t>(i) * C];
    double s = 0, sa = 0, ss = 0;
    for (int c = 0; c < C; c++) s += xi[c], sa += std::fabs(xi[c]);
    const double m = s / C;
    for (int c = 0; c < C; c++) ss += (xi[c] - m) * (xi[c] - m);
    const double var = ss / C, r = 1.0 / std::sqrt(var + eps);
    const double dm = acc(C) * sa / C + kU * std::fabs(m);           // mean: sum, then / C
    const double ev = acc(C) + 4 * kU + C * dm * dm / ss;            // var, relative: two-pass sum
    const double er = 0.5 * (ev * var / (var + eps) + kU) + 2 * kU;  // rstd, relative: + eps, sqrt, 1/x
    rmean[i] = m, tmean[i] = dm, rrstd[i] = r, trstd[i] = er * r;
    for (int c = 0; c < C; c++) {
      const size_t k = static_cast<size_t>(i) * C + c;
      const double nrm = (xi[c] - m) * r;
      rout[k] = nrm * w[c] + bias[c];
      const double en = r * (dm + kU * std::fabs(xi[c] - m)) + std::fabs(nrm) * (er + kU);
      tout_c[k] = std::fabs(w[c]) * en + kU * std::fabs(nrm * w[c]) + kU * std::fabs(rout[k]);
      tout_g[k] = bf16_out(rout[k], tout_c[k]);
    }
  }
  std::vector<float> out[2], mean[2], rstd[2], res[2];
  Backend* bes[2] = {&gpu, &cpu};
  for (int k = 0; k < 2; k++) {
    Backend& be = *bes[k];
    DevBuf dw = upload_compute(be, w), db = upload_compute(be, bias);
    DevBuf o = poisoned_compute(be, x.size()), dmn = poisoned_f32(be, N), drs = poisoned_f32(be, N);
    if (residual) {
      DevBuf da = upload_compute(be, a), dbb = upload_compute(be, b), dr = poisoned_compute(be, x.size());
      be.residual_layernorm_forward(dr.get(), o.get(), dmn.f32(), drs.f32(), da.get(), dbb.get(), dw.get(), db.get(),
                                    N, C);
      res[k] = download_compute(be, dr.get(), x.size());
    } else {
      DevBuf dx = upload_compute(be, x);
      be.layernorm_forward(o.get(), dmn.f32(), drs.f32(), dx.get(), dw.get(), db.get(), N, C);
    }
    out[k] = download_compute(be, o.get(), x.size());
    mean[k] = download_f32(be, dmn.get(), N);
    rstd[k] = download_f32(be, drs.get(), N);
  }
  const std::string tag = std::string(residual ? "residual_layernorm_forward" : "layernorm_forward") +
                          " N=" + std::to_string(N) + " C=" + std::to_string(C);
  expect_twins(tag + " out", out[0], out[1], rout, tout_g, tout_c);
  expect_twins(tag + " mean", mean[0], mean[1], rmean, tmean, tmean);
  expect_twins(tag + " rstd", rstd[0], rstd[1], rrstd, trstd, trstd);
  if (residual) {
    EXPECT_EQ(res[0], x) << tag << ": res must be a + b exactly (cuda)";
    EXPECT_EQ(res[1], x) << tag << ": res must be a + b exactly (cpu)";
  }
}

TEST_F(CudaTwin, LayernormForward) {
  check_layernorm_forward(*gpu, *cpu, 29, 100, false, 103);  // C % 8 != 0: one element at a time
  check_layernorm_forward(*gpu, *cpu, 29, 136, false, 113);  // 16-byte vectors, a partial last round of lanes
  check_layernorm_forward(*gpu, *cpu, 29, 100, true, 123);
  check_layernorm_forward(*gpu, *cpu, 29, 136, true, 133);
}

// On the GPU the fused forward must equal residual_forward then layernorm_forward bit for bit (what makes a
// recompute of ln2 from the kept res2 exact), and the vector and one-element paths must agree bit for bit
// (the same elements in the same order): the unaligned run reads the same numbers one at a time.
TEST_F(CudaTwin, LayernormForwardPathsAreBitIdentical) {
  const int N = 37, C = 264;
  Rng rng(140);
  auto a = uniform_bf16(rng, static_cast<size_t>(N) * C, -3, 3), b = uniform_bf16(rng, a.size(), -3, 3);
  auto w = uniform_bf16(rng, C, 0.5f, 1.5f), bias = uniform_bf16(rng, C, -0.5f, 0.5f);
  Backend& be = *gpu;
  DevBuf da = upload_compute(be, a), db = upload_compute(be, b), dw = upload_compute(be, w), dbias = upload_compute(be, bias);
  DevBuf res = poisoned_compute(be, a.size()), out = poisoned_compute(be, a.size());
  DevBuf mean = poisoned_f32(be, N), rstd = poisoned_f32(be, N);
  be.residual_layernorm_forward(res.get(), out.get(), mean.f32(), rstd.f32(), da.get(), db.get(), dw.get(), dbias.get(),
                                N, C);
  DevBuf res2 = poisoned_compute(be, a.size()), out2 = poisoned_compute(be, a.size());
  DevBuf mean2 = poisoned_f32(be, N), rstd2 = poisoned_f32(be, N);
  be.residual_forward(res2.get(), da.get(), db.get(), a.size());
  be.layernorm_forward(out2.get(), mean2.f32(), rstd2.f32(), res2.get(), dw.get(), dbias.get(), N, C);
  EXPECT_EQ(download_compute(be, res.get(), a.size()), download_compute(be, res2.get(), a.size()));
  EXPECT_EQ(download_compute(be, out.get(), a.size()), download_compute(be, out2.get(), a.size()));
  EXPECT_EQ(download_f32(be, mean.get(), N), download_f32(be, mean2.get(), N));
  EXPECT_EQ(download_f32(be, rstd.get(), N), download_f32(be, rstd2.get(), N));
  // the one-element path: the input one element past a 16-byte boundary
  const std::vector<float> x = download_compute(be, res.get(), a.size());
  OffsetBuf ux = upload_compute_at(be, x, 1);
  DevBuf out3 = poisoned_compute(be, a.size()), mean3 = poisoned_f32(be, N), rstd3 = poisoned_f32(be, N);
  be.layernorm_forward(out3.get(), mean3.f32(), rstd3.f32(), ux.get(), dw.get(), dbias.get(), N, C);
  EXPECT_EQ(download_compute(be, out.get(), a.size()), download_compute(be, out3.get(), a.size()));
  EXPECT_EQ(download_f32(be, mean.get(), N), download_f32(be, mean3.get(), N));
  EXPECT_EQ(download_f32(be, rstd.get(), N), download_f32(be, rstd3.get(), N));
}

// Backward, plain (dinp overwritten) and fused with the residual gradient (dres += dinp). For the fused op
// the reference is dres0 + dinp: the CPU adds its fp32 dinp (u |ref| more); the GPU adds its fp32 dinp
// before the one bf16 rounding of the sum.
void check_layernorm_backward(Backend& gpu, Backend& cpu, int N, int C, bool residual, uint64_t seed) {
  Rng rng(seed);
  auto x = uniform_bf16(rng, static_cast<size_t>(N) * C, -1.5f, 2.0f);
  auto w = uniform_bf16(rng, C, 0.5f, 1.5f);
  auto dout = uniform_bf16(rng, x.size(), -1, 1);
  auto dres0 = uniform_bf16(rng, x.size(), -1, 1);
  auto dw0 = uniform_f32(rng, C, -1, 1), db0 = uniform_f32(rng, C, -1, 1);
  std::vector<float> mean(N), rstd(N);  // shared fp32 statistics: backward is tested on its own
  for (int i = 0; i < N; i++) {
    double s = 0, ss = 0;
    for (int c = 0; c < C; c++) s += x[static_cast<size_t>(i) * C + c];
    const double m = s / C;
    for (int c = 0; c < C; c++) ss += std::pow(x[static_cast<size_t>(i) * C + c] - m, 2);
    mean[i] = static_cast<float>(m);
    rstd[i] = static_cast<float>(1.0 / std::sqrt(ss / C + 1e-5));
  }
  std::vector<double> rdx(x.size()), tdx_c(x.size()), tdx_g(x.size());
  std::vector<double> rdw(dw0.begin(), dw0.end()), rdb(db0.begin(), db0.end()), adw(C), adb(C);
  for (int c = 0; c < C; c++) adw[c] = std::fabs(dw0[c]), adb[c] = std::fabs(db0[c]);
  for (int i = 0; i < N; i++) {
    const size_t o = static_cast<size_t>(i) * C;
    const double m = mean[i], r = rstd[i];
    double a = 0, aa = 0, q = 0, qa = 0;
    for (int c = 0; c < C; c++) {
      const double nrm = (x[o + c] - m) * r, g = static_cast<double>(w[c]) * dout[o + c];
      a += g, aa += std::fabs(g), q += g * nrm, qa += std::fabs(g * nrm);
      rdw[c] += dout[o + c] * nrm, adw[c] += std::fabs(dout[o + c] * nrm);
      rdb[c] += dout[o + c], adb[c] += std::fabs(dout[o + c]);
    }
    a /= C, q /= C;
    const double ea = acc(C) * aa / C + kU * std::fabs(a), eq = (acc(C) + 3 * kU) * qa / C + kU * std::fabs(q);
    for (int c = 0; c < C; c++) {
      const double nrm = (x[o + c] - m) * r, g = static_cast<double>(w[c]) * dout[o + c];
      const double dx = r * (g - a - nrm * q);
      const double inner = ea + std::fabs(nrm) * eq + std::fabs(q) * 2 * kU * std::fabs(nrm) +
                           3 * kU * (std::fabs(g) + std::fabs(a) + std::fabs(nrm * q));
      const double edx = r * inner + kU * std::fabs(dx);  // dx in fp32
      rdx[o + c] = residual ? dres0[o + c] + dx : dx;
      tdx_c[o + c] = residual ? edx + kU * std::fabs(rdx[o + c]) : edx;
      tdx_g[o + c] = bf16_out(rdx[o + c], tdx_c[o + c]);
    }
  }
  std::vector<double> tdw(C), tdb(C);
  for (int c = 0; c < C; c++) tdw[c] = (acc(N + 1) + 3 * kU) * adw[c], tdb[c] = acc(N + 1) * adb[c];
  std::vector<float> dx[2], dw[2], db[2];
  Backend* bes[2] = {&gpu, &cpu};
  for (int k = 0; k < 2; k++) {
    Backend& be = *bes[k];
    DevBuf bx = upload_compute(be, x), bw = upload_compute(be, w), bd = upload_compute(be, dout);
    DevBuf bm = upload_f32(be, mean), br = upload_f32(be, rstd), gw = upload_f32(be, dw0),
           gb = upload_f32(be, db0);
    DevBuf o = residual ? upload_compute(be, dres0) : poisoned_compute(be, x.size());
    if (residual)
      be.layernorm_backward_residual(o.get(), gw.f32(), gb.f32(), bd.get(), bx.get(), bw.get(), bm.f32(), br.f32(), N,
                                     C);
    else
      be.layernorm_backward(o.get(), gw.f32(), gb.f32(), bd.get(), bx.get(), bw.get(), bm.f32(), br.f32(), N, C);
    dx[k] = download_compute(be, o.get(), x.size());
    dw[k] = download_f32(be, gw.get(), C);
    db[k] = download_f32(be, gb.get(), C);
  }
  const std::string tag = std::string(residual ? "layernorm_backward_residual" : "layernorm_backward") +
                          " N=" + std::to_string(N) + " C=" + std::to_string(C);
  expect_twins(tag + (residual ? " dres" : " dinp"), dx[0], dx[1], rdx, tdx_g, tdx_c);
  expect_twins(tag + " dw", dw[0], dw[1], rdw, tdw, tdw);
  expect_twins(tag + " db", db[0], db[1], rdb, tdb, tdb);
}

TEST_F(CudaTwin, LayernormBackward) {
  // N = 700: 88 blocks of up to 8 rows; N = 2100: 128 blocks of 17 rows, several rows per warp
  check_layernorm_backward(*gpu, *cpu, 700, 72, false, 104);    // 16-byte vectors
  check_layernorm_backward(*gpu, *cpu, 2100, 100, false, 114);  // one element at a time
  check_layernorm_backward(*gpu, *cpu, 700, 72, true, 124);
  check_layernorm_backward(*gpu, *cpu, 2100, 100, true, 134);
}

// Wide rows, where the backward's shared memory (2 x C floats per warp, 8 warps) meets the limits: C = 768 needs
// exactly the default 48 KiB; C = 1600 (and C = 1601, one element at a time) opts into more; C = 8192 needs
// 64 KiB a warp, so fewer than 8 warps fit in a block and each takes more rows.
TEST_F(CudaTwin, LayernormBackwardWideRows) {
  check_layernorm_backward(*gpu, *cpu, 300, 768, false, 144);
  check_layernorm_backward(*gpu, *cpu, 300, 1600, true, 154);
  check_layernorm_backward(*gpu, *cpu, 300, 1601, false, 164);
  check_layernorm_backward(*gpu, *cpu, 64, 8192, true, 174);
}

// ---- matmul -----------------------------------------------------------------------------------------------
struct MatmulShape {
  int N, C, OC;
};

// The bias bound is linear_bound (twin_util.h), shared with test_cuda_matmul_gelu.cpp. OC = 50 and an
// unaligned bias take the fallback (product, then the bias kernel); OC = 192 with an aligned bias the epilogue.
void check_matmul_forward(Backend& gpu, Backend& cpu, MatmulShape s, bool with_bias, bool offset_bias, uint64_t seed) {
  const int N = s.N, C = s.C, OC = s.OC;
  Rng rng(seed);
  auto inp = uniform_bf16(rng, static_cast<size_t>(N) * C, -1, 1);
  auto w = uniform_bf16(rng, static_cast<size_t>(OC) * C, -1, 1);
  auto bias = uniform_bf16(rng, OC, -1, 1);
  const size_t n = static_cast<size_t>(N) * OC;
  std::vector<double> ref(n), tc(n), tg(n);
  for (int i = 0; i < N; i++)
    for (int o = 0; o < OC; o++) {
      double sum = 0, abs_sum = 0;
      for (int c = 0; c < C; c++) {
        const double p =
            static_cast<double>(inp[static_cast<size_t>(i) * C + c]) * w[static_cast<size_t>(o) * C + c];
        sum += p, abs_sum += std::fabs(p);
      }
      const double b = with_bias ? bias[o] : 0.0;
      const size_t k = static_cast<size_t>(i) * OC + o;
      ref[k] = sum + b;
      const LinearBound lb = linear_bound(C, sum, abs_sum, b, with_bias);
      tc[k] = lb.cpu, tg[k] = lb.gpu;
    }
  auto run = [&](Backend& be) {
    DevBuf di = upload_compute(be, inp), dw = upload_compute(be, w);
    OffsetBuf db = upload_compute_at(be, bias, offset_bias ? 1 : 0);
    DevBuf out = poisoned_compute(be, n);
    be.matmul_forward(out.get(), di.get(), dw.get(), with_bias ? db.get() : nullptr, N, C, OC);
    return download_compute(be, out.get(), n);
  };
  expect_twins("matmul_forward N=" + std::to_string(N) + " C=" + std::to_string(C) + " OC=" + std::to_string(OC) +
                   (with_bias ? " +bias" : "") + (offset_bias ? " (unaligned)" : ""),
               run(gpu), run(cpu), ref, tg, tc);
}

TEST_F(CudaTwin, MatmulForward) {
  uint64_t seed = 105;
  for (MatmulShape s : {MatmulShape{37, 72, 50}, MatmulShape{128, 256, 192}})
    for (bool bias : {true, false}) check_matmul_forward(*gpu, *cpu, s, bias, false, seed++);
  check_matmul_forward(*gpu, *cpu, MatmulShape{64, 128, 192}, true, true, seed++);  // bias 2 bytes off alignment
}

void check_matmul_backward(Backend& gpu, Backend& cpu, MatmulShape s, bool full, uint64_t seed) {
  const int N = s.N, C = s.C, OC = s.OC;
  Rng rng(seed);
  auto dout = uniform_bf16(rng, static_cast<size_t>(N) * OC, -1, 1);
  auto inp = uniform_bf16(rng, static_cast<size_t>(N) * C, -1, 1);
  auto w = uniform_bf16(rng, static_cast<size_t>(OC) * C, -1, 1);
  auto dw0 = uniform_f32(rng, w.size(), -1, 1), db0 = uniform_f32(rng, OC, -1, 1);
  std::vector<double> rdx(inp.size()), tdx_c(inp.size()), tdx_g(inp.size());
  std::vector<double> rdw(w.size()), tdw(w.size()), rdb(OC), tdb(OC);
  for (int i = 0; i < N; i++)
    for (int c = 0; c < C; c++) {
      double sum = 0, abs_sum = 0;
      for (int o = 0; o < OC; o++) {
        const double p =
            static_cast<double>(dout[static_cast<size_t>(i) * OC + o]) * w[static_cast<size_t>(o) * C + c];
        sum += p, abs_sum += std::fabs(p);
      }
      const size_t k = static_cast<size_t>(i) * C + c;
      rdx[k] = sum, tdx_c[k] = acc(OC) * abs_sum, tdx_g[k] = bf16_out(sum, tdx_c[k]);
    }
  for (int o = 0; o < OC; o++) {
    double sb = db0[o], ab = std::fabs(db0[o]);
    for (int i = 0; i < N; i++)
      sb += dout[static_cast<size_t>(i) * OC + o], ab += std::fabs(dout[static_cast<size_t>(i) * OC + o]);
    rdb[o] = sb, tdb[o] = acc(N + 1) * ab;
    for (int c = 0; c < C; c++) {
      const size_t k = static_cast<size_t>(o) * C + c;
      double sum = dw0[k], abs_sum = std::fabs(dw0[k]);
      for (int i = 0; i < N; i++) {
        const double p =
            static_cast<double>(dout[static_cast<size_t>(i) * OC + o]) * inp[static_cast<size_t>(i) * C + c];
        sum += p, abs_sum += std::fabs(p);
      }
      rdw[k] = sum, tdw[k] = acc(N + 1) * abs_sum;
    }
  }
  std::vector<float> dx[2], dw[2], db[2];
  Backend* bes[2] = {&gpu, &cpu};
  for (int k = 0; k < 2; k++) {
    Backend& be = *bes[k];
    DevBuf bd = upload_compute(be, dout), bi = upload_compute(be, inp), bw = upload_compute(be, w);
    DevBuf gw = upload_f32(be, dw0), gb = upload_f32(be, db0), o = poisoned_compute(be, inp.size());
    be.matmul_backward(full ? o.get() : nullptr, gw.f32(), full ? gb.f32() : nullptr, bd.get(), bi.get(),
                       bw.get(), N, C, OC);
    dx[k] = download_compute(be, o.get(), inp.size());
    dw[k] = download_f32(be, gw.get(), w.size());
    db[k] = download_f32(be, gb.get(), OC);
  }
  const std::string tag = " N=" + std::to_string(N) + " C=" + std::to_string(C) + " OC=" + std::to_string(OC);
  expect_twins("matmul_backward dw" + tag, dw[0], dw[1], rdw, tdw, tdw);
  if (full) {
    expect_twins("matmul_backward dinp" + tag, dx[0], dx[1], rdx, tdx_g, tdx_c);
    expect_twins("matmul_backward dbias" + tag, db[0], db[1], rdb, tdb, tdb);
  } else {  // no dbias requested: the buffer keeps its initial values exactly
    std::vector<double> init(db0.begin(), db0.end()), zero(OC, 0.0);
    expect_twins("matmul_backward untouched dbias" + tag, db[0], db[1], init, zero, zero);
  }
}

TEST_F(CudaTwin, MatmulBackwardAccumulates) {
  uint64_t seed = 120;
  for (MatmulShape s : {MatmulShape{600, 72, 50}, MatmulShape{128, 256, 192}})
    for (bool full : {true, false}) check_matmul_backward(*gpu, *cpu, s, full, seed++);
}

// The bias gradient's vector path (dout 16-byte aligned, OC % 8 == 0) and its one-element path (dout four
// elements, 8 bytes, past a 16-byte boundary) sum the same elements in the same order, so they agree bit for
// bit. 8 bytes rather than 2: the same call's dw product reads dout too, and cuBLASLt's tensor-core kernels
// take 8-byte aligned bf16 operands. OC = 264: one whole 256-column tile and a tile of 8; N = 600 rows: more
// than one pass of the 512-row chunks.
TEST_F(CudaTwin, BiasGradientPathsAreBitIdentical) {
  const int N = 600, C = 16, OC = 264;
  Rng rng(150);
  const auto dout = uniform_bf16(rng, static_cast<size_t>(N) * OC, -1, 1);
  const auto inp = uniform_bf16(rng, static_cast<size_t>(N) * C, -1, 1);
  const auto w = uniform_bf16(rng, static_cast<size_t>(OC) * C, -1, 1);
  const auto db0 = uniform_f32(rng, OC, -1, 1);
  Backend& be = *gpu;
  auto run = [&](size_t offset) {
    OffsetBuf bd = upload_compute_at(be, dout, offset);
    DevBuf bi = upload_compute(be, inp), bw = upload_compute(be, w);
    DevBuf gw = upload_f32(be, std::vector<float>(w.size(), 0.0f)), gb = upload_f32(be, db0);
    be.matmul_backward(nullptr, gw.f32(), gb.f32(), bd.get(), bi.get(), bw.get(), N, C, OC);
    return download_f32(be, gb.get(), OC);
  };
  const std::vector<float> vec = run(0);
  EXPECT_NE(vec, db0) << "the bias gradient must change dbias";
  EXPECT_EQ(run(4), vec) << "the one-element path (dout 8-byte aligned) must equal the vector path";
}

}  // namespace
}  // namespace gpt::test
