// The cudnn path of causal self-attention, a CUDA-only implementation of the attention op of
// kernels/cpu/attention.cpp (its third on this backend, beside attention.cu and attention_fused.cu; the
// backend picks one by --attention, kernels/attention_rules.h): cuDNN's fused flash attention. This file runs
// the plans of attention_cudnn_graph.cu (which builds the operation graphs and says what they compute) and
// caches them per shape; it also holds the T = 1 closed form.
//
// Plans: one per SdpaKey (direction, dims, strides), built on first use or by plan() from reserve_workspace,
// so that no step builds one: the operation graph is finalized, the heuristics (mode A, then fallback) list
// engine configs, and the first whose execution plan finalizes is kept with its workspace size. The
// descriptors of a plan live as long as the plan.
//
// Memory: the plans' workspace and the backward's two non-virtual fp32 tensors (the dQ accumulator and the
// row terms Dsum) come from the backend's scratch, carved in the order of kernels/sizes.h; nothing here
// allocates device memory. The dQ accumulator is zeroed before each backward (NVIDIA's frontend leaves that
// to cuDNN from 9.6 on; the memset is cheap and makes the result independent of that). The order in which the
// engine adds into it is the engine's: unlike the fused path, backward need not be bit-for-bit repeatable
// (NVIDIA's frontend builds another graph, through a dP workspace, when asked for determinism).
//
// T = 1 (cuDNN's backward refuses s_q = s_kv = 1) runs a closed form: one key, so P = 1, out = v, the state is
// the one scaled score s q.k, and the gradient is dv = dout, dq = dk = 0.
//
// What only a GPU can verify (nothing here has run on one yet; attention_cudnn_graph.cu says what the
// deviceless check covers): loading and running cuDNN's kernels, that the results meet the bf16 bounds of
// tests/cuda/test_cuda_attention.cpp, the workspace the plans take on the real GPU and cuDNN, the speed.
#include "kernels/cuda/attention_cudnn.cuh"

#ifdef GPT_WITH_CUDNN
#include <cmath>
#include <initializer_list>
#include <unordered_map>

#include "kernels/cuda/attention_cudnn_graph.cuh"
#include "kernels/cuda/attention_cudnn_key.h"

namespace gpt::cuda {
using namespace cudnn_sdpa;
namespace {

// ---- T = 1: the closed form -----------------------------------------------------------------------------
// One warp per (b, h): out = v, lse = s q.k.
__global__ void closed_form_forward_kernel(bf16* out, float* lse, const bf16* qkv, int BH, int NH, int hs,
                                           float scale) {
  const int bh = blockIdx.x * (blockDim.x / kWarp) + threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
  if (bh >= BH) return;  // uniform per warp
  const int b = bh / NH, h = bh % NH, C = NH * hs;
  const bf16* q = qkv + static_cast<size_t>(b) * 3 * C + static_cast<size_t>(h) * hs;
  const bf16 *k = q + C, *v = q + 2 * C;
  bf16* y = out + static_cast<size_t>(b) * C + static_cast<size_t>(h) * hs;
  float dot = 0.0f;
  for (int d = lane; d < hs; d += kWarp) {
    dot += to_f32(q[d]) * to_f32(k[d]);
    y[d] = v[d];
  }
  dot = warp_sum(dot);
  if (lane == 0) lse[bh] = scale * dot;
}

// dqkv (B, 3C): the q and k parts zero, the v part dout.
__global__ void closed_form_backward_kernel(bf16* dqkv, const bf16* dout, size_t total, int C) {
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    const size_t b = i / (3 * static_cast<size_t>(C));
    const int col = static_cast<int>(i % (3 * static_cast<size_t>(C)));
    dqkv[i] = col < 2 * C ? to_bf16(0.0f) : dout[b * C + (col - 2 * C)];
  }
}

// Largest power of two (<= 256) dividing the address.
int64_t alignment_of(const void* p) {
  const auto a = reinterpret_cast<uintptr_t>(p);
  int64_t al = 256;
  while (al > 1 && a % al != 0) al /= 2;
  return al;
}

void check_aligned(const char* what, std::initializer_list<const void*> ptrs) {
  for (const void* p : ptrs)
    GPT_CHECK(alignment_of(p) >= kAlignment, "cuDNN ", what, " attention: a tensor at ", p, " is not ", kAlignment,
              "-byte aligned (the plans are built for ", kAlignment, ")");
}

}  // namespace

struct CudnnAttention::Impl {
  cudnnHandle_t handle = nullptr;
  cudaStream_t stream = nullptr;
  std::unordered_map<SdpaKey, Plan, SdpaKeyHash> plans;

  const Plan& get(bool backward, const SdpaLayout& l) {
    const SdpaKey key = sdpa_key(backward, l);
    auto it = plans.find(key);
    if (it != plans.end()) return it->second;
    // Refused like a shape cuDNN cannot plan: --attention auto falls back (cuda_backend.cu).
    if (backward) check_cudnn_attention_sequence(l.q.dim[2], static_cast<long long>(cudnnGetVersion()));
    Plan p = build_plan(handle, backward, l);
    return plans.emplace(key, std::move(p)).first->second;
  }
};

CudnnAttention::CudnnAttention(cudaStream_t stream) : impl_(std::make_unique<Impl>()) {
  CUDNN_CHECK(cudnnCreate(&impl_->handle));
  impl_->stream = stream;
  CUDNN_CHECK(cudnnSetStream(impl_->handle, stream));
}

CudnnAttention::~CudnnAttention() {
  impl_->plans.clear();  // the plans' descriptors go before the handle
  if (impl_->handle) cudnnDestroy(impl_->handle);
}

size_t CudnnAttention::plan_count() const { return impl_->plans.size(); }

CudnnAttentionTarget CudnnAttention::target(int device) {
  CudnnAttentionTarget t;
  t.built = true;
  CUDA_CHECK(cudaDeviceGetAttribute(&t.cc_major, cudaDevAttrComputeCapabilityMajor, device));
  CUDA_CHECK(cudaDeviceGetAttribute(&t.cc_minor, cudaDevAttrComputeCapabilityMinor, device));
  t.version = static_cast<long long>(cudnnGetVersion());
  return t;
}

CudnnPlanWorkspace CudnnAttention::plan(int B, int T, int C, int NH) {
  const int hs = head_size(C, NH);
  CudnnPlanWorkspace ws;
  if (B == 0 || T == 0 || cudnn_attention_closed_form(T)) return ws;
  const SdpaLayout l = packed_sdpa_layout(B, T, NH, hs);
  ws.forward = impl_->get(false, l).workspace;
  ws.backward = impl_->get(true, l).workspace;
  return ws;
}

void CudnnAttention::forward(bf16* out, float* lse, const bf16* qkv, int B, int T, int C, int NH, void* scratch,
                             size_t scratch_bytes, cudaStream_t stream) {
  const int hs = head_size(C, NH);
  if (B == 0 || T == 0) return;
  GPT_CHECK(stream == impl_->stream, "cuDNN attention: called on another stream than its handle's");
  const float scale = 1.0f / std::sqrt(static_cast<float>(hs));
  if (cudnn_attention_closed_form(T)) {
    const int BH = B * NH, warps = 4;
    GPT_LAUNCH(closed_form_forward_kernel, static_cast<unsigned>(ceil_div(BH, warps)), warps * kWarp, 0, stream, out,
               lse, qkv, BH, NH, hs, scale);
    return;
  }
  const SdpaLayout l = packed_sdpa_layout(B, T, NH, hs);
  const Plan& p = impl_->get(false, l);
  const int64_t need = cudnn_attention_forward_scratch_bytes(CudnnPlanWorkspace{p.workspace, 0});
  GPT_CHECK((int64_t)scratch_bytes >= need, "cuDNN forward attention: needs ", need, " bytes of scratch, got ",
            scratch_bytes);
  const bf16 *k = qkv + l.k_offset, *v = qkv + l.v_offset;
  check_aligned("forward", {qkv, k, v, out, lse});
  float mask_value = cudnn_attention_mask_value(static_cast<long long>(cudnnGetVersion()));
  float s = scale;
  int64_t uids[] = {kQ, kK, kV, kO, kStats, kScale, kNegInf};
  void* ptrs[] = {const_cast<bf16*>(qkv), const_cast<bf16*>(k), const_cast<bf16*>(v), out, lse, &s, &mask_value};
  Desc pack(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR);
  SET_ATTR(pack.get(), CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, 7, uids);
  SET_ATTR(pack.get(), CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, 7, ptrs);
  SET_ATTR(pack.get(), CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &scratch);
  finalize(pack.get());
  CUDNN_CHECK(cudnnBackendExecute(impl_->handle, p.plan, pack.get()));
}

void CudnnAttention::backward(bf16* dqkv, const bf16* dout, const bf16* qkv, const bf16* out, const float* lse, int B,
                              int T, int C, int NH, void* scratch, size_t scratch_bytes, cudaStream_t stream) {
  const int hs = head_size(C, NH);
  if (B == 0 || T == 0) return;
  GPT_CHECK(stream == impl_->stream, "cuDNN attention: called on another stream than its handle's");
  if (cudnn_attention_closed_form(T)) {
    const size_t total = static_cast<size_t>(B) * 3 * C;
    GPT_LAUNCH(closed_form_backward_kernel, grid_for(total, 256), 256, 0, stream, dqkv, dout, total, C);
    return;
  }
  const SdpaLayout l = packed_sdpa_layout(B, T, NH, hs);
  const Plan& p = impl_->get(true, l);
  const CudnnPlanWorkspace ws = {0, p.workspace};
  const int64_t need = cudnn_attention_backward_scratch_bytes(B, T, C, NH, ws);
  GPT_CHECK((int64_t)scratch_bytes >= need, "cuDNN backward attention: needs ", need, " bytes of scratch, got ",
            scratch_bytes);
  // scratch: dQ accumulator (B, NH, T, hs) fp32 | Dsum (B, NH, T) fp32 | the plan's workspace
  char* base = static_cast<char*>(scratch);
  float* dq_accum = reinterpret_cast<float*>(base);
  float* dsum = reinterpret_cast<float*>(base + cudnn_attention_dq_accum_bytes(B, T, C));
  void* workspace = base + cudnn_attention_dq_accum_bytes(B, T, C) + cudnn_attention_softmax_sum_bytes(B, T, NH);
  CUDA_CHECK(cudaMemsetAsync(dq_accum, 0, static_cast<size_t>(B) * T * C * sizeof(float), stream));
  const bf16 *k = qkv + l.k_offset, *v = qkv + l.v_offset;
  bf16 *dk = dqkv + l.k_offset, *dv = dqkv + l.v_offset;
  check_aligned("backward", {qkv, k, v, out, dout, lse, dqkv, dk, dv, dq_accum, dsum});
  float s = 1.0f / std::sqrt(static_cast<float>(hs)), one = 1.0f;
  float mask_value = cudnn_attention_mask_value(static_cast<long long>(cudnnGetVersion()));
  int64_t uids[] = {kQ, kK, kV, kO, kDO, kStats, kScale, kNegInf, kOne, kDQ, kDK, kDV, kDsum, kDqAccum};
  void* ptrs[] = {const_cast<bf16*>(qkv), const_cast<bf16*>(k), const_cast<bf16*>(v), const_cast<bf16*>(out),
                  const_cast<bf16*>(dout), const_cast<float*>(lse), &s, &mask_value, &one, dqkv, dk, dv, dsum,
                  dq_accum};
  Desc pack(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR);
  SET_ATTR(pack.get(), CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, 14, uids);
  SET_ATTR(pack.get(), CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, 14, ptrs);
  SET_ATTR(pack.get(), CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &workspace);
  finalize(pack.get());
  CUDNN_CHECK(cudnnBackendExecute(impl_->handle, p.plan, pack.get()));
}

}  // namespace gpt::cuda
#endif  // GPT_WITH_CUDNN
