// CUDA causal self-attention (forward, backward, and sampling's cached forward) against its CPU twin. The
// reference is a naive double loop per (batch, head); next to each value it carries a first-order error bound
// (derivation: top of test_cuda_ops.cpp), once for the CPU (fp32 throughout) and once for the GPU, whose P and
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
// The flash-style paths, fused (attention_fused.cu) and cudnn (cuDNN's flash attention, attention_cudnn.cu),
// add, relative to each P they use: the online rescaling (one rounding per key tile), and in backward the
// recomputation exp(s S - lse) with lse = M + log Z rounded in fp32:
//   + u (m |M| + |log Z| + 2 ceil(T/tile) + 8)
// with tile = 64 keys for fused (its kernels' tile) and 16 for cudnn (cuDNN does not publish its tiles; P v
// reduces over keys 16 at a time in a bf16 tensor-core instruction (k = 16), so no tensor-core kernel steps by
// fewer keys, and the term bounds every tiling cuDNN may pick). m = 1 for fused (expf of the natural-base
// argument); m = 2 for cudnn, which may evaluate exp as exp2 of log2(e)-scaled arguments (as FlashAttention
// kernels do), rounding M log2(e) with log2(e) < 2. Both take D = sum_d dy_d y_d from the bf16 output y (error ey):
//   err(D) = sum_d |dy_d| ey_d + acc(hs) sum_d |dy_d y_d|.
// Both keep lse as their state, checked too: d lse / d S_j = P_j, so the scores' errors enter as sum_j P_j es_j
// (es_j as above, which also carries the rounding of each exp), the sum Z adds acc(T) and the rescaling
// 2u per tile, and the final log and add u (|M| + |log Z| + 8):
//   err(lse) = sum_j P_j es_j + acc(T) + u (m |M| + |log Z| + 2 ceil(T/tile) + 8).
// (Both sum Z from the fp32 exponentials, before they are rounded to bf16 for P v, as FlashAttention does.)
// The flash-style paths are also held against the simple path on the GPU: within the sum of both paths' bounds.
#include <algorithm>
#include <cmath>
#include <string>
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
  std::vector<double> lse, tlse;    // (B,NH,T): the flash-style paths' state
};

size_t state_bytes(AttnShape sh) { return sizeof(float) * sh.B * sh.NH * sh.T; }

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
enum class Path { cpu, gpu_simple, gpu_fused, gpu_cudnn };

Path gpu_path(AttentionPath p) {
  return p == AttentionPath::fused ? Path::gpu_fused : p == AttentionPath::cudnn ? Path::gpu_cudnn : Path::gpu_simple;
}

void reference_head(const Mat& q, const Mat& k, const Mat& v, const Mat& dy, Path path, Mat& y, Mat& ey, Mat& dq,
                    Mat& edq, Mat& dk, Mat& edk, Mat& dv, Mat& edv, std::vector<double>& lse,
                    std::vector<double>& lse_tol) {
  const bool gpu = path != Path::cpu, fused = path == Path::gpu_fused || path == Path::gpu_cudnn;
  const double tile = path == Path::gpu_cudnn ? 16.0 : 64.0;  // keys per tile (top of file)
  const double m_exp = path == Path::gpu_cudnn ? 2.0 : 1.0;    // m: the rounding of M in exp's argument
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
    const double tiles = std::ceil(T / tile);
    const double rounding = kU * (m_exp * std::fabs(M) + std::fabs(std::log(Z)) + 2 * tiles + 8);
    const double recompute = fused ? rounding : 0.0;
    lse[i] = M + std::log(Z);
    lse_tol[i] = spread + acc(i + 1) + rounding;
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
  r.lse.resize(static_cast<size_t>(B) * NH * T), r.tlse.resize(r.lse.size());
  for (int b = 0; b < B; b++)
    for (int h = 0; h < NH; h++) {
      Mat q = slice(qkv, b, T, 3 * C, h * hs, hs), k = slice(qkv, b, T, 3 * C, C + h * hs, hs);
      Mat v = slice(qkv, b, T, 3 * C, 2 * C + h * hs, hs), dy = slice(dout, b, T, C, h * hs, hs);
      Mat y = mat(T, hs), ey = y, dq = y, edq = y, dk = y, edk = y, dv = y, edv = y;
      std::vector<double> lse(T), lse_tol(T);
      reference_head(q, k, v, dy, path, y, ey, dq, edq, dk, edk, dv, edv, lse, lse_tol);
      for (int t = 0; t < T; t++) {
        const size_t row = (static_cast<size_t>(b) * NH + h) * T + t;  // (B, NH, T)
        r.lse[row] = lse[t], r.tlse[row] = lse_tol[t];
      }
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

// What one backend computes: out (B,T,C), dqkv (B,T,3C), and the state read as fp32 (the flash-style paths'
// (B,NH,T) log-sum-exp; empty on the simple path).
struct AttnRun {
  std::vector<float> out, dqkv, lse;
};

AttnRun run_attention(Backend& be, const std::vector<float>& qkv, const std::vector<float>& dout, AttnShape sh) {
  const int B = sh.B, T = sh.T, C = sh.C, NH = sh.NH;
  DevBuf dq = upload_compute(be, qkv), dd = upload_compute(be, dout);
  DevBuf o = poisoned_compute(be, dout.size()), g = poisoned_compute(be, qkv.size());
  DevBuf state(be, be.attention_state_bytes(B, T, NH));
  const bool lse_state = be.attention_path() != AttentionPath::simple;
  const std::vector<float> nan_state(size_t{1} * B * NH * T, NAN);  // an lse the op forgets to write fails
  if (lse_state) be.copy_h2d(state.get(), nan_state.data(), state_bytes(sh));
  be.attention_forward(o.get(), state.get(), dq.get(), B, T, C, NH);
  be.attention_backward(g.get(), dd.get(), dq.get(), o.get(), state.get(), B, T, C, NH);
  AttnRun r;
  r.out = download_compute(be, o.get(), dout.size());
  r.dqkv = download_compute(be, g.get(), qkv.size());
  if (lse_state) r.lse = download_f32(be, state.get(), size_t{1} * B * NH * T);
  return r;
}

// The GPU on `path` against the reference and the CPU twin; the flash-style paths' lse against its reference;
// and a path other than simple against the GPU's simple path, within the sum of both paths' bounds.
void check_attention(Backend& gpu, Backend& cpu, AttnShape sh, uint64_t seed,
                     AttentionPath path = AttentionPath::simple) {
  const int B = sh.B, T = sh.T, C = sh.C, NH = sh.NH;
  Rng rng(seed);
  auto qkv = uniform_bf16(rng, static_cast<size_t>(B) * T * 3 * C, -1.5f, 1.5f);
  auto dout = uniform_bf16(rng, static_cast<size_t>(B) * T * C, -1, 1);
  const AttnRef rg = attention_reference(qkv, dout, sh, gpu_path(path));
  const AttnRef rc = attention_reference(qkv, dout, sh, Path::cpu);
  gpu.set_attention_path(path);
  const AttnRun g = run_attention(gpu, qkv, dout, sh), c = run_attention(cpu, qkv, dout, sh);
  const std::string tag = std::string(" ") + attention_path_name(path) + " B=" + std::to_string(B) +
                          " T=" + std::to_string(T) + " C=" + std::to_string(C) + " NH=" + std::to_string(NH);
  expect_twins("attention_forward out" + tag, g.out, c.out, rg.out, rg.tout, rc.tout);
  expect_twins("attention_backward dqkv" + tag, g.dqkv, c.dqkv, rg.dqkv, rg.tdqkv, rc.tdqkv);
  if (path == AttentionPath::simple) return;
  expect_within("attention state lse" + tag + " (cuda vs reference)", g.lse, rg.lse, rg.tlse);
  // A second call of the shape runs the plan cached by the first (cudnn) on new buffers and new scratch,
  // as every later layer and step does: the same bounds hold.
  const AttnRun again = run_attention(gpu, qkv, dout, sh);
  expect_within("attention_forward out" + tag + " (second call)", again.out, rg.out, rg.tout);
  expect_within("attention_backward dqkv" + tag + " (second call)", again.dqkv, rg.dqkv, rg.tdqkv);
  expect_within("attention state lse" + tag + " (second call)", again.lse, rg.lse, rg.tlse);
  const AttnRef rs = attention_reference(qkv, dout, sh, Path::gpu_simple);
  gpu.set_attention_path(AttentionPath::simple);
  const AttnRun s = run_attention(gpu, qkv, dout, sh);
  auto against_simple = [](const std::string& what, const std::vector<float>& got, const std::vector<float>& simple,
                           const std::vector<double>& t1, const std::vector<double>& t2) {
    std::vector<double> ref(simple.begin(), simple.end()), both(ref.size());
    for (size_t i = 0; i < ref.size(); i++) both[i] = t1[i] + t2[i];
    expect_within(what, got, ref, both);
  };
  against_simple("attention_forward out" + tag + " (vs cuda simple)", g.out, s.out, rg.tout, rs.tout);
  against_simple("attention_backward dqkv" + tag + " (vs cuda simple)", g.dqkv, s.dqkv, rg.tdqkv, rs.tdqkv);
}

TEST_F(CudaTwin, AttentionForwardBackward) {
  check_attention(*gpu, *cpu, AttnShape{2, 37, 48, 3}, 401);  // hs 16; T not a multiple of the warp
  check_attention(*gpu, *cpu, AttnShape{1, 70, 64, 2}, 402);  // hs 32
}

// Head sizes 32 and 64; T below, at and across the 64-row tile (partial last tiles, several key tiles).
TEST_F(CudaTwin, FusedAttentionForwardBackward) {
  const AttentionPath fused = AttentionPath::fused;
  check_attention(*gpu, *cpu, AttnShape{2, 37, 64, 2}, 411, fused);   // hs 32, one partial tile
  check_attention(*gpu, *cpu, AttnShape{1, 64, 64, 1}, 412, fused);   // hs 64, exactly one tile
  check_attention(*gpu, *cpu, AttnShape{1, 150, 128, 2}, 413, fused); // hs 64, three tiles, the last partial
}

// The fused kernels with every bf16 buffer `offset` elements into its allocation: offset 1 leaves them off
// the 16-byte boundaries, which sends the kernels down their one-element path.
AttnRun run_fused_at(Backend& be, const std::vector<float>& qkv, const std::vector<float>& dout, AttnShape sh,
                     size_t offset) {
  const int B = sh.B, T = sh.T, C = sh.C, NH = sh.NH;
  OffsetBuf dq = upload_compute_at(be, qkv, offset), dd = upload_compute_at(be, dout, offset);
  OffsetBuf o = upload_compute_at(be, std::vector<float>(dout.size(), NAN), offset);
  OffsetBuf g = upload_compute_at(be, std::vector<float>(qkv.size(), NAN), offset);
  be.set_attention_path(AttentionPath::fused);  // before the state is sized: its size depends on the path
  DevBuf state(be, be.attention_state_bytes(B, T, NH));
  be.attention_forward(o.get(), state.get(), dq.get(), B, T, C, NH);
  be.attention_backward(g.get(), dd.get(), dq.get(), o.get(), state.get(), B, T, C, NH);
  AttnRun r;
  auto download_at = [&](const OffsetBuf& b, size_t n) {
    std::vector<float> all = download_compute(be, b.buf.get(), n + offset);
    return std::vector<float>(all.begin() + offset, all.end());
  };
  r.out = download_at(o, dout.size());
  r.dqkv = download_at(g, qkv.size());
  r.lse = download_f32(be, state.get(), size_t{1} * B * NH * T);
  return r;
}

// The vector path (16-byte loads and stores of the tiles, the dO.O row sums 8 elements a lane) and the
// one-element path copy the same tiles and add the same products in the same order: the same bits.
TEST_F(CudaTwin, FusedAttentionPathsAreBitIdentical) {
  uint64_t seed = 420;
  for (AttnShape sh : {AttnShape{2, 37, 64, 2}, AttnShape{1, 150, 128, 2}}) {  // hs 32 and 64, partial tiles
    Rng rng(seed++);
    auto qkv = uniform_bf16(rng, static_cast<size_t>(sh.B) * sh.T * 3 * sh.C, -1.5f, 1.5f);
    auto dout = uniform_bf16(rng, static_cast<size_t>(sh.B) * sh.T * sh.C, -1, 1);
    const AttnRun vec = run_fused_at(*gpu, qkv, dout, sh, 0), one = run_fused_at(*gpu, qkv, dout, sh, 1);
    const std::string tag = " hs=" + std::to_string(sh.C / sh.NH) + " T=" + std::to_string(sh.T);
    EXPECT_EQ(vec.out, one.out) << "fused forward out" << tag;
    EXPECT_EQ(vec.lse, one.lse) << "fused forward lse" << tag;
    EXPECT_EQ(vec.dqkv, one.dqkv) << "fused backward dqkv" << tag;
    EXPECT_FALSE(std::isnan(vec.out[0]) || std::isnan(vec.dqkv[0])) << "the outputs must be written" << tag;
  }
}

#ifdef GPT_WITH_CUDNN
// A cuDNN before 9.16 refuses to train at `sh`'s T (attention_rules.h): building the shape's plans (on its
// first forward) says so instead of running a graph NVIDIA's frontend would have worked around.
void expect_sequence_refused(Backend& gpu, AttnShape sh, const std::string& why) {
  gpu.set_attention_path(AttentionPath::cudnn);
  const std::vector<float> qkv(size_t{1} * sh.B * sh.T * 3 * sh.C, 0.25f), dout(size_t{1} * sh.B * sh.T * sh.C, 0.5f);
  try {
    run_attention(gpu, qkv, dout, sh);
    ADD_FAILURE() << "T=" << sh.T << " was trained on a cuDNN that needs T % 128 == 0";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(why), std::string::npos) << e.what();
  }
}
#endif

// The cudnn path where this build and GPU have it: head sizes 8 to 128 (every multiple of 8 cuDNN takes on any
// supported GPU), T odd, below and across 64 and 128 keys, multiples of 128 (all a cuDNN before 9.16 trains;
// the others must then be refused), several heads and batches, and T = 1 (the closed form). Without cuDNN in
// the build the path must be refused in the flag's words instead.
TEST_F(CudaTwin, CudnnAttentionForwardBackward) {
#ifdef GPT_WITH_CUDNN
  const AttnShape shapes[] = {
      {2, 37, 48, 3},   // hs 16; T not a multiple of the warp
      {1, 70, 64, 2},   // hs 32
      {1, 150, 128, 2}, // hs 64, T across 128
      {2, 64, 256, 2},  // hs 128
      {1, 129, 64, 8},  // hs 8
      {1, 256, 128, 2}, // hs 64, T a multiple of 128
      {3, 1, 64, 2},    // T = 1: the closed form
  };
  const CudnnAttentionTarget target = gpu->attention_target().cudnn;
  uint64_t seed = 421;
  for (const AttnShape& sh : shapes) {
    const std::string why = cudnn_attention_unsupported(sh.C, sh.NH, target);
    if (!why.empty()) GTEST_SKIP() << "--attention cudnn on this GPU: " << why;
    const std::string seq = cudnn_attention_sequence_unsupported(sh.T, target.version);
    if (seq.empty())
      check_attention(*gpu, *cpu, sh, seed++, AttentionPath::cudnn);
    else
      expect_sequence_refused(*gpu, sh, seq);
  }
#else
  try {
    gpu->set_attention_path(AttentionPath::cudnn);
    FAIL() << "a build without cuDNN accepted --attention cudnn";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--attention cudnn: this build has no cuDNN"), std::string::npos) << e.what();
  }
#endif
}

TEST_F(CudaTwin, FlashStyleStateIsRowLogSumExp) {
  gpu->set_attention_path(AttentionPath::fused);
  EXPECT_EQ(gpu->attention_state_bytes(2, 64, 3), size_t{2} * 3 * 64 * 4);
#ifdef GPT_WITH_CUDNN
  gpu->set_attention_path(AttentionPath::cudnn);
  EXPECT_EQ(gpu->attention_state_bytes(2, 64, 3), size_t{2} * 3 * 64 * 4);
#endif
}

TEST_F(CudaTwin, FusedAttentionRefusesOtherHeadSizes) {
  gpu->set_attention_path(AttentionPath::fused);
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
TEST(AttentionPath, CpuBackendRefusesFlashStylePaths) {
  auto cpu = make_backend("cpu");
  EXPECT_NO_THROW(cpu->set_attention_path(AttentionPath::simple));
  for (AttentionPath p : {AttentionPath::fused, AttentionPath::cudnn}) {
    try {
      cpu->set_attention_path(p);
      FAIL() << "the cpu backend accepted --attention " << attention_path_name(p);
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(std::string("--attention ") + attention_path_name(p)), std::string::npos)
          << e.what();
    }
  }
  EXPECT_EQ(cpu->attention_path(), AttentionPath::simple);
  EXPECT_FALSE(cpu->attention_target().cuda);
}

TEST_F(CudaTwin, AttentionStateIsBf16Probabilities) {
  EXPECT_EQ(gpu->attention_state_bytes(2, 64, 3), size_t{2} * 3 * 64 * 64 * 2);
}

// Sampling's op over a key/value cache (attention_cached_forward), fed the sequence in chunks (a prompt, single
// tokens, a longer run): every chunk's rows against the reference of the whole sequence, on both backends,
// and the caches against the keys and values fed (copies, so exact). The GPU's bound is the fused path's,
// which covers this kernel: it counts every probability as bf16 (a relative ub = 2^16 u), where this kernel
// keeps them in fp32 and adds per tile of 128 keys only the rescaling's exp and product (about 6u + u |m_old -
// m_new| relative), far inside ub at the few tiles of these shapes; the output is rounded to bf16 once.
struct CachedRun {
  std::vector<float> out, k, v;  // (B,T,C); (B,NH,Tmax,hs) each
};

CachedRun run_cached(Backend& be, const std::vector<float>& qkv, AttnShape sh, int Tmax,
                     const std::vector<int>& chunks) {
  const int B = sh.B, T = sh.T, C = sh.C, NH = sh.NH, C3 = 3 * C;
  const size_t cache = static_cast<size_t>(B) * NH * Tmax * (C / NH);
  DevBuf kc = poisoned_compute(be, cache), vc = poisoned_compute(be, cache);
  CachedRun r;
  r.out.assign(static_cast<size_t>(B) * T * C, NAN);
  int past = 0;
  for (int n : chunks) {
    std::vector<float> in(static_cast<size_t>(B) * n * C3);  // (B, n, 3C): the chunk's rows of qkv
    for (int b = 0; b < B; b++)
      std::copy_n(&qkv[(static_cast<size_t>(b) * T + past) * C3], static_cast<size_t>(n) * C3,
                  &in[static_cast<size_t>(b) * n * C3]);
    DevBuf din = upload_compute(be, in), dout = poisoned_compute(be, static_cast<size_t>(B) * n * C);  // (B, n, C)
    be.attention_cached_forward(dout.get(), kc.get(), vc.get(), din.get(), B, n, past, Tmax, C, NH);
    const std::vector<float> o = download_compute(be, dout.get(), static_cast<size_t>(B) * n * C);
    for (int b = 0; b < B; b++)
      std::copy_n(&o[static_cast<size_t>(b) * n * C], static_cast<size_t>(n) * C,
                  &r.out[(static_cast<size_t>(b) * T + past) * C]);
    past += n;
  }
  EXPECT_EQ(past, T);
  r.k = download_compute(be, kc.get(), cache);
  r.v = download_compute(be, vc.get(), cache);
  return r;
}

void check_cached(Backend& gpu, Backend& cpu, AttnShape sh, int Tmax, const std::vector<int>& chunks, uint64_t seed) {
  const int B = sh.B, T = sh.T, C = sh.C, NH = sh.NH, hs = C / NH;
  Rng rng(seed);
  auto qkv = uniform_bf16(rng, static_cast<size_t>(B) * T * 3 * C, -1.5f, 1.5f);
  const std::vector<float> dout(static_cast<size_t>(B) * T * C, 0.0f);
  const AttnRef rg = attention_reference(qkv, dout, sh, Path::gpu_fused);
  const AttnRef rc = attention_reference(qkv, dout, sh, Path::cpu);
  const CachedRun g = run_cached(gpu, qkv, sh, Tmax, chunks), c = run_cached(cpu, qkv, sh, Tmax, chunks);
  const std::string tag = " B=" + std::to_string(B) + " T=" + std::to_string(T) + " hs=" + std::to_string(hs);
  expect_twins("attention_cached_forward out" + tag, g.out, c.out, rg.out, rg.tout, rc.tout);
  for (int b = 0; b < B; b++)
    for (int h = 0; h < NH; h++)
      for (int t = 0; t < T; t++)
        for (int d = 0; d < hs; d++) {
          const size_t at = ((static_cast<size_t>(b) * NH + h) * Tmax + t) * hs + d;
          const size_t row = (static_cast<size_t>(b) * T + t) * 3 * C + h * hs + d;
          ASSERT_EQ(g.k[at], qkv[row + C]) << "key cache" << tag;
          ASSERT_EQ(g.v[at], qkv[row + 2 * C]) << "value cache" << tag;
        }
}

TEST_F(CudaTwin, CachedAttentionMatchesReference) {
  check_cached(*gpu, *cpu, AttnShape{2, 37, 48, 3}, 40, {20, 1, 1, 15}, 421);  // hs 16, one key tile
  check_cached(*gpu, *cpu, AttnShape{1, 300, 128, 2}, 300, {200, 1, 99}, 422); // hs 64, three key tiles
  check_cached(*gpu, *cpu, AttnShape{1, 200, 640, 2}, 200, {150, 1, 49}, 423); // hs 320: 3 columns per thread
}

TEST_F(CudaTwin, CachedAttentionRefusesWhatItCannotRun) {
  const int wide = 2 * (cuda::kCachedAttentionMaxHs + 8);  // two heads above the largest head size
  DevBuf qkv = poisoned_compute(*gpu, 3 * wide), out = poisoned_compute(*gpu, wide);
  DevBuf kc = poisoned_compute(*gpu, 4 * wide), vc = poisoned_compute(*gpu, 4 * wide);
  EXPECT_THROW(gpu->attention_cached_forward(out.get(), kc.get(), vc.get(), qkv.get(), 1, 1, 4, 4, 64, 2), Error);
  EXPECT_THROW(gpu->attention_cached_forward(out.get(), kc.get(), vc.get(), qkv.get(), 1, 2, 3, 4, 64, 2), Error);
  EXPECT_THROW(gpu->attention_cached_forward(out.get(), kc.get(), vc.get(), qkv.get(), 1, 1, 0, 4, wide, 2), Error);
}

}  // namespace
}  // namespace gpt::test
