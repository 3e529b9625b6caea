// The CUDA backend's runtime memory rules and its cuBLASLt plan cache:
//  - the plan key (kernels/cuda/gemm_key.h): operand alignment against closed forms, and every field of the
//    key telling shapes apart (host only: runs without a GPU);
//  - the ledger against the driver: allocating 3 x 256 MiB grows the driver's in-use count (cudaMemGetInfo)
//    by at least the ledger's growth and at most 2 MiB of rounding per block, and freeing gives it back;
//  - reserve_workspace: ops at the reserved shape allocate nothing, a larger op fails naming itself, and a
//    larger reservation grows the workspace explicitly;
//  - the plan cache: one plan per shape key, pointers (including the bias) taken per call, results against
//    a naive double-precision loop with the bound derived in test_cuda_ops.cpp;
//  - the cuDNN attention plans (builds with cuDNN): built once per shape by reserve_workspace, whose scratch
//    is what the memory planner predicts from the measured plans, and ops at that shape allocate nothing.
// The GPU tests skip when no GPU is visible.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <unordered_set>
#include <vector>

#include "src/core/check.h"
#include "kernels/cuda/gemm_key.h"
#include "tests/cuda/twin_util.h"
#ifdef GPT_WITH_CUDA
#include "src/backend/cuda/cuda_backend.h"
#endif

namespace gpt::test {
namespace {

using cuda::GemmKey;
using cuda::GemmKeyHash;
using cuda::operand_alignment;

// ---- the plan key (host) --------------------------------------------------------------------------------
TEST(GemmKey, OperandAlignmentClosedForms) {
  EXPECT_EQ(operand_alignment(0, 0, 2, 1), 256u) << "no operand: no constraint";
  EXPECT_EQ(operand_alignment(0x7f0000001000ull, 0, 2, 1), 256u);
  EXPECT_EQ(operand_alignment(0x7f0000001002ull, 0, 2, 1), 2u);
  EXPECT_EQ(operand_alignment(0x7f0000001010ull, 0, 2, 1), 16u);
  EXPECT_EQ(operand_alignment(0x7f0000001080ull, 0, 4, 1), 128u);
  // batches: every matrix must be aligned, so the stride in bytes counts too (24 bf16 = 48 bytes -> 16)
  EXPECT_EQ(operand_alignment(0x7f0000001000ull, 24, 2, 3), 16u);
  EXPECT_EQ(operand_alignment(0x7f0000001000ull, 24, 2, 1), 256u) << "a single matrix has no stride";
  EXPECT_EQ(operand_alignment(0x7f0000001000ull, 4096, 4, 2), 256u);
}

TEST(GemmKey, EveryFieldSeparatesShapes) {
  GemmKey base;
  base.M = 64, base.N = 96, base.K = 80, base.lda = 80, base.ldb = 80, base.ldc = 96;
  base.batch = 2, base.stride_a = 5120, base.stride_b = 7680, base.stride_c = 6144;
  const std::vector<void (*)(GemmKey&)> changes = {
      [](GemmKey& k) { k.M++; },          [](GemmKey& k) { k.N++; },
      [](GemmKey& k) { k.K++; },          [](GemmKey& k) { k.lda++; },
      [](GemmKey& k) { k.ldb++; },        [](GemmKey& k) { k.ldc++; },
      [](GemmKey& k) { k.trans_a = true; }, [](GemmKey& k) { k.trans_b = true; },
      [](GemmKey& k) { k.batch++; },      [](GemmKey& k) { k.stride_a++; },
      [](GemmKey& k) { k.stride_b++; },   [](GemmKey& k) { k.stride_c++; },
      [](GemmKey& k) { k.c_f32 = true; }, [](GemmKey& k) { k.bias = true; },
      [](GemmKey& k) { k.beta_zero = false; }, [](GemmKey& k) { k.align_a = 16; },
      [](GemmKey& k) { k.align_b = 16; }, [](GemmKey& k) { k.align_c = 16; },
      [](GemmKey& k) { k.align_bias = 16; },
  };
  std::unordered_set<GemmKey, GemmKeyHash> keys = {base};
  const GemmKeyHash hash;
  for (size_t i = 0; i < changes.size(); i++) {
    GemmKey k = base;
    changes[i](k);
    EXPECT_NE(k, base) << "change " << i;
    EXPECT_NE(hash(k), hash(base)) << "change " << i << " does not reach the hash";
    keys.insert(k);
  }
  EXPECT_EQ(keys.size(), changes.size() + 1) << "two different changes gave equal keys";
  GemmKey same = base;  // a copy is the same key (what a second call with other pointers builds)
  EXPECT_EQ(same, base);
  EXPECT_EQ(hash(same), hash(base));
  EXPECT_EQ(keys.count(same), 1u);
}

#ifdef GPT_WITH_CUDA
TEST(CudaMemory, CheckNeedsTheCudaBackend) {
  auto be = make_backend("cpu");
  try {
    cuda_memory_check(*be);
    FAIL() << "cuda_memory_check accepted the cpu backend";
  } catch (const gpt::Error& e) {
    EXPECT_NE(std::string(e.what()).find("needs the cuda backend"), std::string::npos) << e.what();
  }
}

int64_t workspace_bytes(Backend& be) { return be.ledger().current(MemDomain::device, MemCat::workspace); }

// ---- ledger vs driver -----------------------------------------------------------------------------------
TEST(CudaMemory, DriverTracksLedger) {
  if (!gpt::cuda_available()) GTEST_SKIP() << "no CUDA GPU visible";
  auto be = make_backend("cuda");
  be->synchronize();
  const CudaMemoryCheck m0 = cuda_memory_check(*be);
  EXPECT_EQ(m0.ledger_bytes, be->ledger().current_total(MemDomain::device));
  EXPECT_GT(m0.live_allocations, 0) << "the cuBLASLt workspace is a live block";
  EXPECT_EQ(m0.slack_bytes, m0.live_allocations * kCudaAllocGranularity);

  const int64_t block = int64_t{256} << 20;
  std::vector<void*> blocks;
  for (int i = 0; i < 3; i++) blocks.push_back(be->alloc((size_t)block, MemCat::activation));
  const CudaMemoryCheck m1 = cuda_memory_check(*be);
  const int64_t ledger_growth = m1.ledger_bytes - m0.ledger_bytes;
  const int64_t driver_growth = m1.driver_bytes - m0.driver_bytes;
  EXPECT_EQ(ledger_growth, 3 * block);
  EXPECT_EQ(m1.live_allocations - m0.live_allocations, 3);
  EXPECT_GE(driver_growth, ledger_growth) << "the driver saw less than the ledger";
  EXPECT_LE(driver_growth, ledger_growth + 3 * kCudaAllocGranularity) << "more than 2 MiB rounding per block";

  for (void* p : blocks) be->free(p);
  const CudaMemoryCheck m2 = cuda_memory_check(*be);
  EXPECT_EQ(m2.ledger_bytes, m0.ledger_bytes);
  EXPECT_EQ(m2.live_allocations, m0.live_allocations);
  EXPECT_LE(std::llabs((long long)(m2.driver_bytes - m0.driver_bytes)), 3 * kCudaAllocGranularity)
      << "the driver did not get the memory back";
}

// ---- reserve_workspace --------------------------------------------------------------------------------
// Buffers for attention forward/backward at (B, T, C, NH), filled with bf16 values.
struct AttentionBufs {
  DevBuf qkv, out, state, dout, dqkv;
  AttentionBufs(Backend& be, Rng& rng, int B, int T, int C, int NH)
      : qkv(upload_compute(be, uniform_bf16(rng, (size_t)B * T * 3 * C, -1, 1))),  // (B, T, 3C)
        out(be, (size_t)B * T * C * be.compute_size()),                              // (B, T, C)
        state(be, be.attention_state_bytes(B, T, NH)),
        dout(upload_compute(be, uniform_bf16(rng, (size_t)B * T * C, -1, 1))),      // (B, T, C)
        dqkv(be, (size_t)B * T * 3 * C * be.compute_size()) {}                      // (B, T, 3C)
};

TEST(CudaMemory, ReservedShapeRunsWithoutGrowing) {
  if (!gpt::cuda_available()) GTEST_SKIP() << "no CUDA GPU visible";
  auto be = make_backend("cuda");
  const int B = 2, T = 64, C = 128, NH = 4, N = B * T, OC = 4 * C;
  const int64_t ws0 = workspace_bytes(*be);
  be->reserve_workspace(B, T, C, NH, OC);
  const int64_t ws1 = workspace_bytes(*be);
  EXPECT_GT(ws1, ws0) << "the reservation allocated nothing";

  Rng rng(2024);
  AttentionBufs att(*be, rng, B, T, C, NH);
  DevBuf x = upload_compute(*be, uniform_bf16(rng, (size_t)N * C, -1, 1));  // (N, C)
  DevBuf g = upload_compute(*be, uniform_bf16(rng, C, 0.5f, 1.5f));         // (C)
  DevBuf b = upload_compute(*be, uniform_bf16(rng, C, -0.5f, 0.5f));        // (C)
  DevBuf ln(*be, (size_t)N * C * 2), mean(*be, N * 4), rstd(*be, N * 4), dln(*be, (size_t)N * C * 2);
  DevBuf dg(*be, C * 4), db(*be, C * 4);
  DevBuf w = upload_compute(*be, uniform_bf16(rng, (size_t)OC * C, -1, 1));     // (OC, C)
  DevBuf dy = upload_compute(*be, uniform_bf16(rng, (size_t)N * OC, -1, 1));    // (N, OC)
  DevBuf dx(*be, (size_t)N * C * 2), dw(*be, (size_t)OC * C * 4), dbias(*be, OC * 4);
  be->zero(dg.get(), C * 4);  // accumulated gradients start at zero
  be->zero(db.get(), C * 4);
  be->zero(dw.get(), (size_t)OC * C * 4);
  be->zero(dbias.get(), OC * 4);
  be->synchronize();
  const CudaMemoryCheck before = cuda_memory_check(*be);

  be->attention_forward(att.out.get(), att.state.get(), att.qkv.get(), B, T, C, NH);
  be->attention_backward(att.dqkv.get(), att.dout.get(), att.qkv.get(), att.out.get(), att.state.get(), B, T, C,
                         NH);
  be->layernorm_forward(ln.get(), mean.f32(), rstd.f32(), x.get(), g.get(), b.get(), N, C);
  be->layernorm_backward(dln.get(), dg.f32(), db.f32(), ln.get(), x.get(), g.get(), mean.f32(), rstd.f32(), N, C);
  be->matmul_backward(dx.get(), dw.f32(), dbias.f32(), dy.get(), x.get(), w.get(), N, C, OC);
  const double ss = be->sum_squares(dw.f32(), (size_t)OC * C);
  be->synchronize();
  EXPECT_TRUE(std::isfinite(ss) && ss > 0) << ss;
  EXPECT_EQ(workspace_bytes(*be), ws1) << "an op at the reserved shape grew the workspace";
  EXPECT_EQ(cuda_memory_check(*be).live_allocations, before.live_allocations) << "an op allocated";
}

TEST(CudaMemory, OpLargerThanReservationFailsClearly) {
  if (!gpt::cuda_available()) GTEST_SKIP() << "no CUDA GPU visible";
  auto be = make_backend("cuda");
  const int C = 64, NH = 2;
  be->reserve_workspace(1, 16, C, NH, 4 * C);
  const int64_t ws1 = workspace_bytes(*be);
  Rng rng(77);
  const int B = 4, T = 128;
  AttentionBufs att(*be, rng, B, T, C, NH);
  try {
    be->attention_forward(att.out.get(), att.state.get(), att.qkv.get(), B, T, C, NH);
    FAIL() << "attention_forward grew a reserved workspace";
  } catch (const gpt::Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("attention_forward"), std::string::npos) << msg;
    EXPECT_NE(msg.find("bytes"), std::string::npos) << msg;
    EXPECT_NE(msg.find("reserve_workspace"), std::string::npos) << msg;
  }
  EXPECT_EQ(workspace_bytes(*be), ws1) << "the failed op changed the workspace";

  // Reserving for the larger shape grows it explicitly; then the op runs and allocates nothing.
  be->reserve_workspace(B, T, C, NH, 4 * C);
  const int64_t ws2 = workspace_bytes(*be);
  EXPECT_GT(ws2, ws1);
  be->attention_forward(att.out.get(), att.state.get(), att.qkv.get(), B, T, C, NH);
  be->synchronize();
  EXPECT_EQ(workspace_bytes(*be), ws2);
}

// ---- the plan cache -------------------------------------------------------------------------------------
// out (N, OC) = x (N, C) @ w^T + bias against a double loop, within the one linear-layer bound every matmul
// test uses (linear_bound, twin_util.h: the bias epilogue may round the product before it adds the bias).
void expect_linear(const std::string& what, Backend& be, const void* out, const std::vector<float>& x,
                   const std::vector<float>& w, const std::vector<float>& bias, int N, int C, int OC) {
  std::vector<double> ref((size_t)N * OC), tol(ref.size());
  for (int n = 0; n < N; n++)
    for (int o = 0; o < OC; o++) {
      double s = 0, mag = 0;
      for (int k = 0; k < C; k++) {
        const double t = (double)x[(size_t)n * C + k] * w[(size_t)o * C + k];
        s += t, mag += std::fabs(t);
      }
      ref[(size_t)n * OC + o] = s + bias[o];
      tol[(size_t)n * OC + o] = linear_bound(C, s, mag, bias[o], true).gpu;
    }
  expect_within(what, download_compute(be, out, (size_t)N * OC), ref, tol);
}

TEST(CudaGemmPlans, OnePlanPerShapeKeyPointersPerCall) {
  if (!gpt::cuda_available()) GTEST_SKIP() << "no CUDA GPU visible";
  auto be = make_backend("cuda");
  const int N = 64, C = 96, OC = 80, shift = 8;  // shift: 8 bf16 = 16 bytes, so the view is 16-byte aligned
  Rng rng(31);
  const auto x = uniform_bf16(rng, (size_t)N * C + shift, -1, 1);  // (N, C) plus the shifted view's tail
  const auto w = uniform_bf16(rng, (size_t)OC * C, -1, 1);         // (OC, C)
  const auto b1 = uniform_bf16(rng, OC, -1, 1), b2 = uniform_bf16(rng, OC, -1, 1);
  DevBuf dx = upload_compute(*be, x), dw = upload_compute(*be, w);
  DevBuf db1 = upload_compute(*be, b1), db2 = upload_compute(*be, b2);
  DevBuf out1(*be, (size_t)N * OC * 2), out2(*be, (size_t)N * OC * 2), out3(*be, (size_t)N * OC * 2);
  const size_t p0 = cuda_gemm_plan_count(*be);

  be->matmul_forward(out1.get(), dx.get(), dw.get(), db1.get(), N, C, OC);
  EXPECT_EQ(cuda_gemm_plan_count(*be), p0 + 1);
  // Same shape, same alignments, other output and bias: the cached plan, with this call's bias.
  be->matmul_forward(out2.get(), dx.get(), dw.get(), db2.get(), N, C, OC);
  EXPECT_EQ(cuda_gemm_plan_count(*be), p0 + 1) << "a second call of the same shape planned again";
  // A 16-byte aligned input (not 256): another key, another plan.
  const void* shifted = static_cast<const char*>(dx.get()) + shift * 2;
  be->matmul_forward(out3.get(), shifted, dw.get(), db1.get(), N, C, OC);
  EXPECT_EQ(cuda_gemm_plan_count(*be), p0 + 2);
  // A different shape: one more.
  be->matmul_forward(out1.get(), dx.get(), dw.get(), db1.get(), N / 2, C, OC);
  EXPECT_EQ(cuda_gemm_plan_count(*be), p0 + 3);
  be->matmul_forward(out1.get(), dx.get(), dw.get(), db1.get(), N, C, OC);
  EXPECT_EQ(cuda_gemm_plan_count(*be), p0 + 3);

  expect_linear("first call", *be, out1.get(), x, w, b1, N, C, OC);
  expect_linear("cached plan, other bias", *be, out2.get(), x, w, b2, N, C, OC);
  const std::vector<float> x_shifted(x.begin() + shift, x.end());
  expect_linear("16-byte aligned input", *be, out3.get(), x_shifted, w, b1, N, C, OC);
}

#ifdef GPT_WITH_CUDNN
// The cudnn path's plans: reserve_workspace builds the forward and backward plans of its shape and reserves
// their workspace beside the backward's fp32 tensors (kernels/sizes.h), exactly what the memory planner's
// measured figure gives; ops at that shape then build no plan and allocate nothing; another T is two more
// plans; T = 1 (the closed form) builds none.
TEST(CudaCudnnPlans, ReservedShapeIsPlannedOnceAndRunsWithoutAllocating) {
  if (!gpt::cuda_available()) GTEST_SKIP() << "no CUDA GPU visible";
  auto be = make_backend("cuda");
  const int B = 2, T = 128, C = 128, NH = 2, OC = 4 * C;  // T % 128 == 0: every cuDNN the path takes trains it
  const std::string why = cudnn_attention_unsupported(C, NH, be->attention_target().cudnn);
  if (!why.empty()) GTEST_SKIP() << "--attention cudnn on this GPU: " << why;
  be->set_attention_path(AttentionPath::cudnn);
  EXPECT_EQ(cuda_cudnn_plan_count(*be), 0u);
  const int64_t ws0 = workspace_bytes(*be);  // the cuBLASLt workspace
  be->reserve_workspace(B, T, C, NH, OC);
  EXPECT_EQ(cuda_cudnn_plan_count(*be), 2u) << "forward and backward";
  const int64_t ws1 = workspace_bytes(*be);
  const std::optional<cuda::CudnnPlanWorkspace> measured = measured_cudnn_plan_workspace(B, T, C, NH);
  ASSERT_TRUE(measured.has_value());
  std::printf("[  cudnn   ] B=%d T=%d C=%d NH=%d: plan workspace forward %lld, backward %lld bytes\n", B, T, C, NH,
              (long long)measured->forward, (long long)measured->backward);
  EXPECT_EQ(ws1 - ws0, cuda::op_scratch_bytes(B, T, C, NH, OC, AttentionPath::cudnn, *measured))
      << "the reservation is not what the memory planner predicts from the measured plans";

  Rng rng(2025);
  AttentionBufs att(*be, rng, B, T, C, NH);
  be->synchronize();
  const CudaMemoryCheck before = cuda_memory_check(*be);
  be->attention_forward(att.out.get(), att.state.get(), att.qkv.get(), B, T, C, NH);
  be->attention_backward(att.dqkv.get(), att.dout.get(), att.qkv.get(), att.out.get(), att.state.get(), B, T, C,
                         NH);
  be->synchronize();
  EXPECT_EQ(workspace_bytes(*be), ws1) << "an op at the reserved shape grew the workspace";
  EXPECT_EQ(cuda_memory_check(*be).live_allocations, before.live_allocations) << "an op allocated";
  EXPECT_EQ(cuda_cudnn_plan_count(*be), 2u) << "an op at the reserved shape planned again";
  const std::vector<float> out = download_compute(*be, att.out.get(), (size_t)B * T * C);
  for (float x : out) ASSERT_TRUE(std::isfinite(x));

  be->reserve_workspace(B, 2 * T, C, NH, OC);
  EXPECT_EQ(cuda_cudnn_plan_count(*be), 4u);
  be->reserve_workspace(B, 1, C, NH, OC);
  EXPECT_EQ(cuda_cudnn_plan_count(*be), 4u) << "T = 1 runs the closed form, without plans";
}
#endif
#endif

}  // namespace
}  // namespace gpt::test
