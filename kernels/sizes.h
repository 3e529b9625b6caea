// The bytes the kernels keep or need besides their inputs and outputs, as pure arithmetic with no CUDA
// headers: the attention state each backend keeps from forward to backward, the CUDA ops' scratch, and the
// cuBLASLt workspace. The kernels and backends use these, and so does `gpt memplan`, so each size is
// stated once.
//
// Sizes are int64 bytes that saturate at INT64_MAX instead of wrapping, so an absurd shape (d1024 at
// T = 2^20) reaches the planner as "too large" rather than as a small wrapped number.
#pragma once
#include <algorithm>
#include <cstdint>

#include "kernels/attention_rules.h"
#include "src/core/size_math.h"

namespace gpt {

namespace cpu {
// Attention state: the softmax probabilities (B, NH, T, T) fp32.
inline int64_t attention_state_bytes(int64_t B, int64_t T, int64_t NH) { return sat_mul({B, NH, T, T, 4}); }
}  // namespace cpu

namespace cuda {
constexpr int kLayernormBlocks = 128;  // most row ranges (blocks) of layernorm backward's dw/db partials
constexpr int kBiasGradChunks = 64;    // row chunks of matmul's bias-gradient reduction (fixed: deterministic)
constexpr int kSumSquaresBlocks = 512; // partial sums of sum_squares
constexpr int kSumSquaresSlots = 64;   // results of sum_squares_all per host copy (more buffers: in chunks)
constexpr int64_t kCublasWorkspaceBytes = int64_t{32} << 20;  // the cuBLASLt workspace, one per backend
// The largest head size of the cached attention (sampling, attention.cu): its query and accumulator, 8 bytes
// per channel, fill at most the 48 KiB of shared memory a launch gets without opting in (less the key tile's
// 640 bytes). It needs no scratch.
constexpr int kCachedAttentionMaxHs = 6016;

// Rounds a byte count up to 256 so sub-buffers carved from one scratch block stay aligned for cuBLASLt
// and vector loads.
inline int64_t round_up_256(int64_t bytes) { return bytes > INT64_MAX - 255 ? INT64_MAX : (bytes + 255) & ~int64_t{255}; }

// layernorm_backward(_residual): per-block partial dw and db, (kLayernormBlocks, 2, C) fp32 (no larger than
// the fc bias-gradient partials, kBiasGradChunks x 4C).
inline int64_t layernorm_backward_scratch_bytes(int64_t C) { return sat_mul({kLayernormBlocks, 2, C, 4}); }
// matmul_backward with a bias: per-chunk partial dbias, (kBiasGradChunks, OC) fp32.
inline int64_t matmul_backward_scratch_bytes(int64_t OC) { return sat_mul({kBiasGradChunks, OC, 4}); }
// encoder_backward over N = B*T positions: the (token, position) order and each token's group start and size,
// three (N) int32 arrays, each rounded up to 256 bytes.
inline int64_t encoder_backward_scratch_bytes(int64_t N) { return sat_mul({3, round_up_256(sat_mul({N, 4}))}); }
// sum_squares and sum_squares_all: kSumSquaresBlocks partials (reused buffer after buffer, in stream order)
// and kSumSquaresSlots results (one per buffer of a chunk, copied to the host together), fp64.
inline int64_t sum_squares_scratch_bytes() { return int64_t{kSumSquaresBlocks + kSumSquaresSlots} * 8; }

// The simple attention path keeps the softmax probabilities P (B, NH, T, T) bf16; its scratch holds seven
// head-major (B, NH, T, hs) bf16 copies and the (B, NH, T, T) scores in fp32 and bf16.
inline int64_t attention_state_bytes(int64_t B, int64_t T, int64_t NH) { return sat_mul({B, NH, T, T, 2}); }
inline int64_t attention_scratch_bytes(int64_t B, int64_t T, int64_t C, int64_t NH) {
  const int64_t heads = round_up_256(sat_mul({B, T, C, 2})), tt = sat_mul({B, NH, T, T});
  return sat_add({sat_mul({7, heads}), round_up_256(sat_mul({tt, 4})), round_up_256(sat_mul({tt, 2}))});
}
// The fused path keeps the row log-sum-exp (B, NH, T) fp32; its backward's scratch holds the softmax-gradient
// row terms (B, NH, T) fp32.
inline int64_t fused_attention_state_bytes(int64_t B, int64_t T, int64_t NH) { return sat_mul({B, NH, T, 4}); }
inline int64_t fused_attention_scratch_bytes(int64_t B, int64_t T, int64_t NH) { return round_up_256(sat_mul({B, NH, T, 4})); }

// The cudnn path (attention_cudnn.cu) keeps the row log-sum-exp (B, NH, T) fp32 like the fused path (cuDNN's
// softmax statistics: max + log of the sum of exponentials of the scaled scores). Its scratch holds what the
// execution plans need: in forward the forward plan's workspace; in backward the fp32 dQ accumulator
// (B, NH, T, hs), the softmax-gradient row terms (B, NH, T) fp32, and the backward plan's workspace. The plans'
// workspace sizes are the cuDNN library's to decide, known once a plan is built on a GPU (CudnnPlanWorkspace).
// T = 1 runs the closed form (output = v, state = the one score, gradient only into v) and needs no scratch.
struct CudnnPlanWorkspace {
  int64_t forward = 0, backward = 0;  // bytes, as the execution plans report them
};
inline bool cudnn_attention_closed_form(int64_t T) { return T == 1; }
inline int64_t cudnn_attention_state_bytes(int64_t B, int64_t T, int64_t NH) { return sat_mul({B, NH, T, 4}); }
inline int64_t cudnn_attention_dq_accum_bytes(int64_t B, int64_t T, int64_t C) {
  return round_up_256(sat_mul({B, T, C, 4}));
}
inline int64_t cudnn_attention_softmax_sum_bytes(int64_t B, int64_t T, int64_t NH) {
  return round_up_256(sat_mul({B, NH, T, 4}));
}
inline int64_t cudnn_attention_forward_scratch_bytes(const CudnnPlanWorkspace& ws) { return round_up_256(ws.forward); }
inline int64_t cudnn_attention_backward_scratch_bytes(int64_t B, int64_t T, int64_t C, int64_t NH,
                                                      const CudnnPlanWorkspace& ws) {
  return sat_add({cudnn_attention_dq_accum_bytes(B, T, C), cudnn_attention_softmax_sum_bytes(B, T, NH),
                  round_up_256(ws.backward)});
}
inline int64_t cudnn_attention_scratch_bytes(int64_t B, int64_t T, int64_t C, int64_t NH,
                                             const CudnnPlanWorkspace& ws) {
  if (cudnn_attention_closed_form(T)) return 0;
  return std::max(cudnn_attention_forward_scratch_bytes(ws), cudnn_attention_backward_scratch_bytes(B, T, C, NH, ws));
}

// The attention state and scratch of each path on the CUDA backend.
inline int64_t attention_state_bytes(AttentionPath path, int64_t B, int64_t T, int64_t NH) {
  switch (path) {
    case AttentionPath::fused: return fused_attention_state_bytes(B, T, NH);
    case AttentionPath::cudnn: return cudnn_attention_state_bytes(B, T, NH);
    case AttentionPath::simple: break;
  }
  return attention_state_bytes(B, T, NH);
}
inline int64_t attention_scratch_bytes(AttentionPath path, int64_t B, int64_t T, int64_t C, int64_t NH,
                                       const CudnnPlanWorkspace& ws) {
  switch (path) {
    case AttentionPath::fused: return fused_attention_scratch_bytes(B, T, NH);
    case AttentionPath::cudnn: return cudnn_attention_scratch_bytes(B, T, C, NH, ws);
    case AttentionPath::simple: break;
  }
  return attention_scratch_bytes(B, T, C, NH);
}

// The one scratch block the CUDA backend reserves before step 1 for a model's ops at micro-batch (B, T):
// the largest request among layernorm backward over C, the bias gradient of up to max_bias_oc outputs,
// attention on the chosen path (with the cuDNN plans' workspace for cudnn), the embedding backward over B*T
// positions, and sum_squares.
inline int64_t op_scratch_bytes(int64_t B, int64_t T, int64_t C, int64_t NH, int64_t max_bias_oc, AttentionPath path,
                                const CudnnPlanWorkspace& ws = {}, int64_t tp = 1) {
  int64_t need = sum_squares_scratch_bytes();
  need = std::max(need, layernorm_backward_scratch_bytes(C));
  need = std::max(need, encoder_backward_scratch_bytes(sat_mul({B, T})));
  if (max_bias_oc > 0) need = std::max(need, matmul_backward_scratch_bytes(max_bias_oc));
  need = std::max(need, attention_scratch_bytes(path, B, T, C / tp, NH / tp, ws));  // NH/tp heads per rank
  return need;
}
}  // namespace cuda

}  // namespace gpt
