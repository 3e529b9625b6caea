// The host-side rules of the attention paths, which run without a GPU (and without CUDA in the build):
//  - the cudnn path's view of our packed tensors (kernels/cuda/attention_cudnn_key.h): every element of the
//    (B, NH, T, hs) views of q, k, v, out and the (B, NH, T) log-sum-exp lands where attention.cu's index map
//    and the fused path's state put it; kt is k transposed; q, k, v tile the packed row without overlap;
//  - the plan-cache key: equal for equal calls, and every field telling plans apart (equality and hash);
//  - kernels/sizes.h for the cudnn path: state, scratch, the closed form at T = 1;
//  - kernels/attention_rules.h: what --attention auto picks for each target and head size, and the one-line
//    errors of explicit paths a target lacks.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include <set>
#include <string>
#include <vector>

#include "kernels/attention_rules.h"
#include "kernels/cuda/attention_cudnn_key.h"
#include "kernels/sizes.h"
#include "src/core/check.h"

namespace gpt::test {
namespace {

using cuda::SdpaKey;
using cuda::SdpaKeyHash;
using cuda::SdpaLayout;
using cuda::SdpaView;

// ---- the views ------------------------------------------------------------------------------------------
TEST(CudnnAttentionLayout, ViewsFollowThePackedIndexMap) {
  const int64_t B = 3, T = 5, NH = 4, hs = 8, C = NH * hs;
  const SdpaLayout l = cuda::packed_sdpa_layout(B, T, NH, hs);
  EXPECT_EQ(l.k_offset, C);
  EXPECT_EQ(l.v_offset, 2 * C);
  for (const SdpaView* v : {&l.q, &l.k, &l.v, &l.o}) {
    EXPECT_EQ(v->dim[0], B);
    EXPECT_EQ(v->dim[1], NH);
    EXPECT_EQ(v->dim[2], T);
    EXPECT_EQ(v->dim[3], hs);
    EXPECT_EQ(v->stride[3], 1) << "cuDNN needs the head dimension contiguous";
  }
  for (int64_t b = 0; b < B; b++)
    for (int64_t h = 0; h < NH; h++)
      for (int64_t t = 0; t < T; t++) {
        for (int64_t d = 0; d < hs; d++) {
          // attention.cu: element (b, h, t, d) of q is qkv[(b*T + t)*3C + h*hs + d]; k at +C, v at +2C; out
          // and dout are (B, T, C) with the same column map.
          const int64_t packed = (b * T + t) * 3 * C + h * hs + d;
          EXPECT_EQ(cuda::offset_of(l.q, b, h, t, d), packed);
          EXPECT_EQ(l.k_offset + cuda::offset_of(l.k, b, h, t, d), packed + C);
          EXPECT_EQ(l.v_offset + cuda::offset_of(l.v, b, h, t, d), packed + 2 * C);
          EXPECT_EQ(cuda::offset_of(l.o, b, h, t, d), (b * T + t) * C + h * hs + d);
          // kt (b, h, d, t) is k (b, h, t, d); vt likewise
          EXPECT_EQ(cuda::offset_of(l.kt, b, h, d, t), cuda::offset_of(l.k, b, h, t, d));
          EXPECT_EQ(cuda::offset_of(l.vt, b, h, d, t), cuda::offset_of(l.v, b, h, t, d));
        }
        // the fused path's lse layout (B, NH, T), so the two flash-style states mean the same memory
        EXPECT_EQ(cuda::offset_of(l.stats, b, h, t, 0), (b * NH + h) * T + t);
      }
  EXPECT_EQ(l.kt.dim[2], hs);
  EXPECT_EQ(l.kt.dim[3], T);
}

TEST(CudnnAttentionLayout, QkvViewsTileThePackedBufferOnce) {
  const int64_t B = 2, T = 3, NH = 3, hs = 16, C = NH * hs;
  const SdpaLayout l = cuda::packed_sdpa_layout(B, T, NH, hs);
  std::vector<int> hits(B * T * 3 * C, 0);
  for (int part = 0; part < 3; part++) {
    const int64_t base = part == 0 ? 0 : part == 1 ? l.k_offset : l.v_offset;
    const SdpaView& v = part == 0 ? l.q : part == 1 ? l.k : l.v;
    for (int64_t b = 0; b < B; b++)
      for (int64_t h = 0; h < NH; h++)
        for (int64_t t = 0; t < T; t++)
          for (int64_t d = 0; d < hs; d++) hits[base + cuda::offset_of(v, b, h, t, d)]++;
  }
  for (size_t i = 0; i < hits.size(); i++) ASSERT_EQ(hits[i], 1) << "element " << i;
}

// ---- the plan key ---------------------------------------------------------------------------------------
TEST(CudnnAttentionKey, EqualCallsShareAPlanAndEveryFieldSeparates) {
  const SdpaKey a = cuda::sdpa_key(false, cuda::packed_sdpa_layout(4, 256, 12, 64));
  const SdpaKey same = cuda::sdpa_key(false, cuda::packed_sdpa_layout(4, 256, 12, 64));
  EXPECT_EQ(a, same);
  EXPECT_EQ(SdpaKeyHash{}(a), SdpaKeyHash{}(same));
  EXPECT_EQ(a.B, 4);
  EXPECT_EQ(a.T, 256);
  EXPECT_EQ(a.NH, 12);
  EXPECT_EQ(a.hs, 64);
  EXPECT_EQ(a.qkv_stride[2], 3 * 768);
  EXPECT_EQ(a.o_stride[2], 768);

  std::vector<SdpaKey> keys = {a};
  auto changed = [&](void (*f)(SdpaKey&)) {
    SdpaKey k = a;
    f(k);
    keys.push_back(k);
  };
  changed([](SdpaKey& k) { k.backward = true; });
  changed([](SdpaKey& k) { k.B++; });
  changed([](SdpaKey& k) { k.T++; });
  changed([](SdpaKey& k) { k.NH++; });
  changed([](SdpaKey& k) { k.hs++; });
  for (int i = 0; i < 4; i++) {
    SdpaKey k = a;
    k.qkv_stride[i]++;
    keys.push_back(k);
    k = a;
    k.o_stride[i]++;
    keys.push_back(k);
    k = a;
    k.stats_stride[i]++;
    keys.push_back(k);
  }
  std::set<size_t> hashes;
  for (size_t i = 0; i < keys.size(); i++) {
    hashes.insert(SdpaKeyHash{}(keys[i]));
    for (size_t j = 0; j < keys.size(); j++) EXPECT_EQ(keys[i] == keys[j], i == j) << i << " vs " << j;
  }
  EXPECT_EQ(hashes.size(), keys.size()) << "two keys share a hash (allowed, but FNV-1a separates these)";
  // forward and backward of one shape, and shapes differing only in T, are distinct plans
  EXPECT_NE(cuda::sdpa_key(true, cuda::packed_sdpa_layout(4, 256, 12, 64)), a);
  EXPECT_NE(cuda::sdpa_key(false, cuda::packed_sdpa_layout(4, 255, 12, 64)), a);
}

// ---- sizes ----------------------------------------------------------------------------------------------
TEST(CudnnAttentionSizes, StateScratchAndClosedForm) {
  const int64_t B = 4, T = 256, C = 128, NH = 2;
  EXPECT_EQ(cuda::attention_state_bytes(AttentionPath::cudnn, B, T, NH), B * NH * T * 4);
  EXPECT_EQ(cuda::attention_state_bytes(AttentionPath::cudnn, B, T, NH),
            cuda::attention_state_bytes(AttentionPath::fused, B, T, NH));
  EXPECT_EQ(cuda::attention_state_bytes(AttentionPath::simple, B, T, NH), B * NH * T * T * 2);
  const cuda::CudnnPlanWorkspace none{}, ws{1, 3000};
  // backward: dQ accumulator 524288 + row terms 8192, each 256-aligned, + the workspace rounded to 3072
  EXPECT_EQ(cuda::cudnn_attention_scratch_bytes(B, T, C, NH, none), 524288 + 8192);
  EXPECT_EQ(cuda::cudnn_attention_scratch_bytes(B, T, C, NH, ws), 524288 + 8192 + 3072);
  EXPECT_EQ(cuda::cudnn_attention_forward_scratch_bytes(ws), 256);
  EXPECT_EQ(cuda::cudnn_attention_scratch_bytes(B, T, C, NH, cuda::CudnnPlanWorkspace{1 << 21, 0}), 1 << 21);
  EXPECT_EQ(cuda::cudnn_attention_softmax_sum_bytes(1, 3, 1), 256) << "rounded up to 256 bytes";
  EXPECT_TRUE(cuda::cudnn_attention_closed_form(1));
  EXPECT_FALSE(cuda::cudnn_attention_closed_form(2));
  EXPECT_EQ(cuda::cudnn_attention_scratch_bytes(B, 1, C, NH, ws), 0) << "T = 1 needs no plan and no scratch";
  // the reservation takes the largest request: here the cudnn backward's
  EXPECT_EQ(cuda::op_scratch_bytes(B, T, C, NH, 4 * C, AttentionPath::cudnn, ws), 524288 + 8192 + 3072);
  EXPECT_EQ(cuda::op_scratch_bytes(B, 1, C, NH, 4 * C, AttentionPath::cudnn, ws),
            cuda::matmul_backward_scratch_bytes(4 * C));
}

// ---- rules ----------------------------------------------------------------------------------------------
CudnnAttentionTarget hopper() {
  CudnnAttentionTarget t;
  t.built = true, t.cc_major = 9, t.cc_minor = 0, t.version = 91900;
  return t;
}

AttentionTarget gpu(const CudnnAttentionTarget& c) {
  AttentionTarget t;
  t.cuda = true;
  t.cudnn = c;
  return t;
}

std::string error_of(const std::string& flag, const AttentionTarget& t, int C, int NH) {
  try {
    resolve_attention_path(flag, t, C, NH);
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(AttentionRules, AutoTakesCudnnThenFusedThenSimple) {
  const AttentionTarget h100 = gpu(hopper());
  EXPECT_EQ(resolve_attention_path("auto", AttentionTarget{}, 768, 12), AttentionPath::simple) << "cpu";
  EXPECT_EQ(resolve_attention_path("auto", h100, 768, 12), AttentionPath::cudnn);  // hs 64
  EXPECT_EQ(resolve_attention_path("auto", h100, 48, 3), AttentionPath::cudnn);    // hs 16: fused lacks it
  EXPECT_EQ(resolve_attention_path("auto", h100, 2048, 8), AttentionPath::cudnn);  // hs 256 on sm_90
  EXPECT_EQ(resolve_attention_path("auto", h100, 36, 3), AttentionPath::simple);   // hs 12: neither
  CudnnAttentionTarget ampere = hopper();
  ampere.cc_major = 8;
  EXPECT_EQ(resolve_attention_path("auto", gpu(ampere), 2048, 8), AttentionPath::simple);  // hs 256 > 128
  EXPECT_EQ(resolve_attention_path("auto", gpu(ampere), 1024, 8), AttentionPath::cudnn);   // hs 128
  CudnnAttentionTarget unbuilt = hopper();
  unbuilt.built = false;
  EXPECT_EQ(resolve_attention_path("auto", gpu(unbuilt), 768, 12), AttentionPath::fused);
  EXPECT_EQ(resolve_attention_path("auto", gpu(unbuilt), 48, 3), AttentionPath::simple);
  CudnnAttentionTarget old = hopper();
  old.version = 90700;
  EXPECT_EQ(resolve_attention_path("auto", gpu(old), 512, 16), AttentionPath::fused);  // hs 32
  old.version = 91001;  // the frontend's known-bug versions
  EXPECT_EQ(resolve_attention_path("auto", gpu(old), 512, 16), AttentionPath::fused);
  old.version = 91002;  // before 9.16 sequence lengths are limited per shape, not here
  EXPECT_EQ(resolve_attention_path("auto", gpu(old), 512, 16), AttentionPath::cudnn);
  CudnnAttentionTarget volta = hopper();
  volta.cc_major = 7;
  EXPECT_EQ(resolve_attention_path("auto", gpu(volta), 768, 12), AttentionPath::fused);
  // the fallback when cuDNN cannot plan a shape auto chose it for
  EXPECT_EQ(attention_fallback_without_cudnn(768, 12), AttentionPath::fused);
  EXPECT_EQ(attention_fallback_without_cudnn(48, 3), AttentionPath::simple);
  // explicit paths are taken as asked where they run
  EXPECT_EQ(resolve_attention_path("simple", h100, 768, 12), AttentionPath::simple);
  EXPECT_EQ(resolve_attention_path("fused", h100, 768, 12), AttentionPath::fused);
  EXPECT_EQ(resolve_attention_path("cudnn", h100, 768, 12), AttentionPath::cudnn);
  EXPECT_EQ(resolve_attention_path("simple", AttentionTarget{}, 768, 12), AttentionPath::simple);
}

// Before cuDNN 9.16 the backward takes only T that are multiples of 128 (NVIDIA's frontend works around a
// bug of those versions for the others); T = 1 is the closed form, which needs no plan.
TEST(AttentionRules, CudnnBefore916TrainsMultiplesOf128) {
  EXPECT_EQ(cudnn_attention_sequence_unsupported(1024, 91501), "");
  EXPECT_EQ(cudnn_attention_sequence_unsupported(128, 90800), "");
  EXPECT_EQ(cudnn_attention_sequence_unsupported(1, 90800), "");
  EXPECT_EQ(cudnn_attention_sequence_unsupported(1000, 91600), "");
  EXPECT_EQ(cudnn_attention_sequence_unsupported(37, 91900), "");
  const std::string e = cudnn_attention_sequence_unsupported(1000, 91501);
  EXPECT_EQ(e, "cuDNN 9.15.1 trains only sequence lengths that are multiples of 128 (9.16 or newer takes any), "
               "T is 1000");
  EXPECT_NE(cudnn_attention_sequence_unsupported(129, 91599), "");
  EXPECT_NE(cudnn_attention_sequence_unsupported(2, 90800), "");
}

// The causal mask's fill follows NVIDIA's frontend: before cuDNN 9.10 the lowest finite float (those versions'
// softmax prefers it), -infinity from 9.10 on. Either way a masked score's exp, after the row's max is
// subtracted, is exactly 0 in fp32.
TEST(AttentionRules, CudnnMaskValueFollowsTheVersion) {
  for (long long v : {90800LL, 90900LL, 90901LL}) {
    EXPECT_EQ(cudnn_attention_mask_value(v), -std::numeric_limits<float>::max()) << v;
    EXPECT_EQ(std::exp(cudnn_attention_mask_value(v) - 10.0f), 0.0f) << v;
  }
  for (long long v : {91000LL, 91002LL, 91600LL, 91900LL})
    EXPECT_EQ(cudnn_attention_mask_value(v), -std::numeric_limits<float>::infinity()) << v;
}

TEST(AttentionRules, ExplicitPathsATargetLacksAreOneLineErrors) {
  const AttentionTarget h100 = gpu(hopper());
  auto expect = [](const std::string& e, const std::string& needle) {
    EXPECT_NE(e.find(needle), std::string::npos) << e;
    EXPECT_EQ(e.find('\n'), std::string::npos) << e;
  };
  expect(error_of("flash", h100, 768, 12), "--attention: expected auto, simple, fused or cudnn, got 'flash'");
  expect(error_of("cudnn", AttentionTarget{}, 768, 12), "--attention cudnn: the cpu backend has only the simple path");
  expect(error_of("fused", AttentionTarget{}, 768, 12), "--attention fused: the cpu backend has only the simple path");
  CudnnAttentionTarget unbuilt = hopper();
  unbuilt.built = false;
  expect(error_of("cudnn", gpu(unbuilt), 768, 12), "--attention cudnn: this build has no cuDNN");
  expect(error_of("cudnn", h100, 36, 3), "--attention cudnn: supports head sizes that are multiples of 8 up to 256");
  expect(error_of("cudnn", h100, 36, 3), "this model has 12");
  expect(error_of("cudnn", h100, 4224, 16), "this model has 264");
  expect(error_of("cudnn", h100, 100, 3), "channels 100 not divisible by heads 3");
  CudnnAttentionTarget ampere = hopper();
  ampere.cc_major = 8, ampere.cc_minor = 6;
  expect(error_of("cudnn", gpu(ampere), 2048, 8), "up to 128 on compute capability 8.x, this model has 256");
  CudnnAttentionTarget old = hopper();
  old.version = 90703;
  expect(error_of("cudnn", gpu(old), 768, 12), "needs cuDNN 9.8 or newer, the loaded library is 9.7.3");
  old.version = 91000;
  expect(error_of("cudnn", gpu(old), 768, 12), "cuDNN 9.10.0 has known bugs in its attention backward");
  old.version = 91203;
  EXPECT_EQ(error_of("cudnn", gpu(old), 768, 12), "(no error)");
  CudnnAttentionTarget volta = hopper();
  volta.cc_major = 7;
  expect(error_of("cudnn", gpu(volta), 768, 12), "needs compute capability 8.0 or newer, this GPU has 7.0");
  expect(error_of("fused", h100, 48, 3), "--attention fused: supports head sizes 32 and 64, this model has 16");
}

}  // namespace
}  // namespace gpt::test
