// CUDA causal self-attention (forward and backward) against its CPU twin. The reference is a naive double
// loop per (batch, head); next to each value it carries a first-order error bound (derivation: top of
// test_cuda_ops.cpp), once for the CPU (fp32 throughout) and once for the GPU, whose probabilities P and
// softmax gradient dS are bf16 matrices (relative perturbations of ub) and whose outputs are rounded to bf16.
//
// Per head, scale s = 1/sqrt(hs), causal rows i over keys j <= i:
//   S = s q k^T: acc(hs) of s sum|q k|, plus 2u |S| (the scale's own rounding and its product)
//   e_ij = exp(S_ij - M_i) carries es_ij = err(S_ij) + u |S_ij - M_i| + 4u, relative
//   P = e / sum e:   relative err(P_ij) = es_ij + sum_l P_il es_il + acc(T) + 2u  [+ ub on the GPU]
//   y = P v:         sum_j err(P_ij) |v_j| + acc(T) sum_j P_ij |v_j|
//   dP = dy v^T:     acc(hs) sum |dy v|
//   D = sum P dP:    sum_l (err(P_il) |dP_il| + P_il err(dP_il)) + (acc(T) + u) sum_l P_il |dP_il|
//   dS = P (dP - D): err(P) |dP - D| + P (err(dP) + err(D) + 2u (|dP| + |D|))  [+ ub (|dS| + err) on the GPU]
//   dq = s dS k, dk = s dS^T q, dv = P^T dy: the same product rule with K = T, plus 2u for the scale.
// The fused path (attention_fused.cu) adds, relative to each P it uses: the online rescaling (one rounding
// per key tile), and in backward the recomputation exp(s S - lse) with lse = M + log Z rounded in fp32:
//   + u (|M| + |log Z| + 2 ceil(T/64) + 8)
// and it takes D = sum_d dy_d y_d from the bf16 output y (error ey):  err(D) = sum_d |dy_d| ey_d
//   + acc(hs) sum_d |dy_d y_d|.
#include <algorithm>
#include <cmath>
#include <vector>

#include "src/core/check.h"
#include "tests/cuda/twin_util.h"

namespace gpt::test {
namespace {

struct AttnShape {
  int B, T, C, NH;
};

struct AttnRef {
  std::vector<double> out, tout;    // (B,T,C)
  std::vector<double> dqkv, tdqkv;  // (B,T,3C)
};

using Mat = std::vector<std::vector<double>>;
Mat mat(int r, int c) { return Mat(r, std::vector<double>(c, 0.0)); }

// The head slices of one (b, h): rows of qkv (stride 3C) or dout (stride C) at column offset `off`.
Mat slice(const std::vector<float>& src, int b, int T, int stride, int off, int hs) {
  Mat m = mat(T, hs);
  for (int t = 0; t < T; t++)
    for (int d = 0; d < hs; d++) m[t][d] = src[(static_cast<size_t>(b) * T + t) * stride + off + d];
  return m;
}

// One head, forward and backward, with error bounds; `gpu` adds the bf16 roundings.
enum class Path { cpu, gpu_simple, gpu_fused };

void reference_head(const Mat& q, const Mat& k, const Mat& v, const Mat& dy, Path path, Mat& y, Mat& ey, Mat& dq,
                    Mat& edq, Mat& dk, Mat& edk, Mat& dv, Mat& edv) {
  const bool gpu = path != Path::cpu, fused = path == Path::gpu_fused;
  const int T = static_cast<int>(q.size()), hs = static_cast<int>(q[0].size());
  const double s = 1.0 / std::sqrt(static_cast<double>(hs)), ub = gpu ? kUb : 0.0;
  Mat P = mat(T, T), eP = mat(T, T), dP = mat(T, T), edP = mat(T, T), dS = mat(T, T), edS = mat(T, T);
  for (int i = 0; i < T; i++) {
    std::vector<double> S(i + 1), es(i + 1);
    for (int j = 0; j <= i; j++) {
      double dot = 0, adot = 0;
      for (int d = 0; d < hs; d++) dot += q[i][d] * k[j][d], adot += std::fabs(q[i][d] * k[j][d]);
      S[j] = s * dot;
      es[j] = acc(hs) * s * adot + 2 * kU * std::fabs(S[j]);
    }
    const double M = *std::max_element(S.begin(), S.end());
    double Z = 0, spread = 0;
    for (int j = 0; j <= i; j++) Z += std::exp(S[j] - M), es[j] += kU * std::fabs(S[j] - M) + 4 * kU;
    for (int j = 0; j <= i; j++) P[i][j] = std::exp(S[j] - M) / Z, spread += P[i][j] * es[j];
    const double tiles = std::ceil(T / 64.0);
    const double recompute = fused ? kU * (std::fabs(M) + std::fabs(std::log(Z)) + 2 * tiles + 8) : 0.0;
    for (int j = 0; j <= i; j++) eP[i][j] = P[i][j] * (es[j] + spread + acc(T) + 2 * kU + ub + recompute);
  }
  for (int i = 0; i < T; i++)
    for (int d = 0; d < hs; d++) {
      double sum = 0, e = 0, a = 0;
      for (int j = 0; j <= i; j++)
        sum += P[i][j] * v[j][d], e += eP[i][j] * std::fabs(v[j][d]), a += P[i][j] * std::fabs(v[j][d]);
      y[i][d] = sum, ey[i][d] = e + acc(T) * a;
      if (gpu) ey[i][d] = bf16_out(sum, ey[i][d]);
    }
  for (int i = 0; i < T; i++) {
    double D = 0, eD = 0, aD = 0;
    for (int j = 0; j <= i; j++) {
      double dot = 0, adot = 0;
      for (int d = 0; d < hs; d++) dot += dy[i][d] * v[j][d], adot += std::fabs(dy[i][d] * v[j][d]);
      dP[i][j] = dot, edP[i][j] = acc(hs) * adot;
      D += P[i][j] * dot, eD += eP[i][j] * std::fabs(dot) + P[i][j] * edP[i][j], aD += P[i][j] * std::fabs(dot);
    }
    eD += (acc(T) + kU) * aD;
    if (fused) {  // D from the bf16 output instead of sum P dP
      eD = 0;
      double ady = 0;
      for (int d = 0; d < hs; d++) eD += std::fabs(dy[i][d]) * ey[i][d], ady += std::fabs(dy[i][d] * y[i][d]);
      eD += acc(hs) * ady + kU * std::fabs(D);
    }
    for (int j = 0; j <= i; j++) {
      dS[i][j] = P[i][j] * (dP[i][j] - D);
      edS[i][j] = eP[i][j] * std::fabs(dP[i][j] - D) +
                  P[i][j] * (edP[i][j] + eD + 2 * kU * (std::fabs(dP[i][j]) + std::fabs(D)));
      if (gpu) edS[i][j] += ub * (std::fabs(dS[i][j]) + edS[i][j]);
    }
  }
  // dq = s dS k (sum over j <= i); dk = s dS^T q and dv = P^T dy (sums over i >= j).
  for (int t = 0; t < T; t++)
    for (int d = 0; d < hs; d++) {
      double sq = 0, eq = 0, aq = 0, sk = 0, ek = 0, ak = 0, sv = 0, ev = 0, av = 0;
      for (int j = 0; j <= t; j++)
        sq += dS[t][j] * k[j][d], eq += edS[t][j] * std::fabs(k[j][d]), aq += std::fabs(dS[t][j] * k[j][d]);
      for (int i = t; i < T; i++) {
        sk += dS[i][t] * q[i][d], ek += edS[i][t] * std::fabs(q[i][d]), ak += std::fabs(dS[i][t] * q[i][d]);
        sv += P[i][t] * dy[i][d], ev += eP[i][t] * std::fabs(dy[i][d]), av += P[i][t] * std::fabs(dy[i][d]);
      }
      dq[t][d] = s * sq, edq[t][d] = s * (eq + acc(T) * aq) + 2 * kU * std::fabs(dq[t][d]);
      dk[t][d] = s * sk, edk[t][d] = s * (ek + acc(T) * ak) + 2 * kU * std::fabs(dk[t][d]);
      dv[t][d] = sv, edv[t][d] = ev + acc(T) * av;
      if (gpu) {
        edq[t][d] = bf16_out(dq[t][d], edq[t][d]);
        edk[t][d] = bf16_out(dk[t][d], edk[t][d]);
        edv[t][d] = bf16_out(dv[t][d], edv[t][d]);
      }
    }
}

AttnRef attention_reference(const std::vector<float>& qkv, const std::vector<float>& dout, AttnShape sh,
                            Path path) {
  const int B = sh.B, T = sh.T, C = sh.C, NH = sh.NH, hs = C / NH;
  AttnRef r;
  r.out.resize(static_cast<size_t>(B) * T * C), r.tout.resize(r.out.size());
  r.dqkv.resize(static_cast<size_t>(B) * T * 3 * C), r.tdqkv.resize(r.dqkv.size());
  for (int b = 0; b < B; b++)
    for (int h = 0; h < NH; h++) {
      Mat q = slice(qkv, b, T, 3 * C, h * hs, hs), k = slice(qkv, b, T, 3 * C, C + h * hs, hs);
      Mat v = slice(qkv, b, T, 3 * C, 2 * C + h * hs, hs), dy = slice(dout, b, T, C, h * hs, hs);
      Mat y = mat(T, hs), ey = y, dq = y, edq = y, dk = y, edk = y, dv = y, edv = y;
      reference_head(q, k, v, dy, path, y, ey, dq, edq, dk, edk, dv, edv);
      for (int t = 0; t < T; t++)
        for (int d = 0; d < hs; d++) {
          const size_t o = (static_cast<size_t>(b) * T + t) * C + h * hs + d;
          r.out[o] = y[t][d], r.tout[o] = ey[t][d];
          const size_t g = (static_cast<size_t>(b) * T + t) * 3 * C + h * hs + d;
          r.dqkv[g] = dq[t][d], r.tdqkv[g] = edq[t][d];
          r.dqkv[g + C] = dk[t][d], r.tdqkv[g + C] = edk[t][d];
          r.dqkv[g + 2 * C] = dv[t][d], r.tdqkv[g + 2 * C] = edv[t][d];
        }
    }
  return r;
}

void check_attention(Backend& gpu, Backend& cpu, AttnShape sh, uint64_t seed, bool fused = false) {
  const int B = sh.B, T = sh.T, C = sh.C, NH = sh.NH;
  Rng rng(seed);
  auto qkv = uniform_bf16(rng, static_cast<size_t>(B) * T * 3 * C, -1.5f, 1.5f);
  auto dout = uniform_bf16(rng, static_cast<size_t>(B) * T * C, -1, 1);
  const AttnRef rg = attention_reference(qkv, dout, sh, fused ? Path::gpu_fused : Path::gpu_simple);
  const AttnRef rc = attention_reference(qkv, dout, sh, Path::cpu);
  gpu.set_fused_attention(fused);
  std::vector<float> out[2], dqkv[2];
  Backend* bes[2] = {&gpu, &cpu};
  for (int k = 0; k < 2; k++) {
    Backend& be = *bes[k];
    DevBuf dq = upload_compute(be, qkv), dd = upload_compute(be, dout);
    DevBuf o = poisoned_compute(be, dout.size()), g = poisoned_compute(be, qkv.size());
    DevBuf state(be, be.attention_state_bytes(B, T, NH));
    be.attention_forward(o.get(), state.get(), dq.get(), B, T, C, NH);
    be.attention_backward(g.get(), dd.get(), dq.get(), o.get(), state.get(), B, T, C, NH);
    out[k] = download_compute(be, o.get(), dout.size());
    dqkv[k] = download_compute(be, g.get(), qkv.size());
  }
  const std::string tag = std::string(fused ? " fused" : " simple") + " B=" + std::to_string(B) + " T=" + std::to_string(T) + " C=" + std::to_string(C) +
                          " NH=" + std::to_string(NH);
  expect_twins("attention_forward out" + tag, out[0], out[1], rg.out, rg.tout, rc.tout);
  expect_twins("attention_backward dqkv" + tag, dqkv[0], dqkv[1], rg.dqkv, rg.tdqkv, rc.tdqkv);
}

TEST_F(CudaTwin, AttentionForwardBackward) {
  check_attention(*gpu, *cpu, AttnShape{2, 37, 48, 3}, 401);  // hs 16; T not a multiple of the warp
  check_attention(*gpu, *cpu, AttnShape{1, 70, 64, 2}, 402);  // hs 32
}

// Head sizes 32 and 64; T below, at and across the 64-row tile (partial last tiles, several key tiles).
TEST_F(CudaTwin, FusedAttentionForwardBackward) {
  check_attention(*gpu, *cpu, AttnShape{2, 37, 64, 2}, 411, true);   // hs 32, one partial tile
  check_attention(*gpu, *cpu, AttnShape{1, 64, 64, 1}, 412, true);   // hs 64, exactly one tile
  check_attention(*gpu, *cpu, AttnShape{1, 150, 128, 2}, 413, true); // hs 64, three tiles, the last partial
}

TEST_F(CudaTwin, FusedAttentionStateIsRowLogSumExp) {
  gpu->set_fused_attention(true);
  EXPECT_EQ(gpu->attention_state_bytes(2, 64, 3), size_t{2} * 3 * 64 * 4);
}

TEST_F(CudaTwin, FusedAttentionRefusesOtherHeadSizes) {
  gpu->set_fused_attention(true);
  const int B = 1, T = 8, C = 48, NH = 3;  // hs 16
  DevBuf qkv = upload_compute(*gpu, std::vector<float>(size_t{B} * T * 3 * C, 0.5f));
  DevBuf out(*gpu, size_t{B} * T * C * gpu->compute_size()), state(*gpu, gpu->attention_state_bytes(B, T, NH));
  try {
    gpu->attention_forward(out.get(), state.get(), qkv.get(), B, T, C, NH);
    FAIL() << "head size 16 was accepted by the fused path";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--attention simple"), std::string::npos) << e.what();
  }
}

// Runs without a GPU: the cpu backend has one path, and says so in the flag's terms.
TEST(AttentionPath, CpuBackendRefusesFused) {
  auto cpu = make_backend("cpu");
  EXPECT_NO_THROW(cpu->set_fused_attention(false));
  try {
    cpu->set_fused_attention(true);
    FAIL() << "the cpu backend accepted --attention fused";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--attention fused"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(cpu->fused_attention());
}

TEST_F(CudaTwin, AttentionStateIsBf16Probabilities) {
  EXPECT_EQ(gpu->attention_state_bytes(2, 64, 3), size_t{2} * 3 * 64 * 64 * 2);
}

}  // namespace
}  // namespace gpt::test
