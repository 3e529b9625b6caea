// The attention paths and what each can run, stated once for the kernels, the backends, the runtime that
// resolves --attention and the memory planner (src/plan). Pure and host-only.
//
//   simple  batched products and a causal-softmax kernel, keeping the (T,T) probabilities: every backend,
//           every head size. The reference.
//   fused   the flash-style WMMA kernels of kernels/cuda/attention_fused.cu: cuda, head sizes 32 and 64.
//   cudnn   cuDNN's fused flash attention through its graph API (kernels/cuda/attention_cudnn*.cu): cuda built
//           with cuDNN, head sizes the cuDNN SDPA engines take (cudnn_attention_unsupported below).
//   auto    (the flag's default) cudnn where it is supported, else fused where it is, else simple.
#pragma once
#include <limits>
#include <string>

#include "src/core/check.h"

namespace gpt {

enum class AttentionPath { simple, fused, cudnn };

inline const char* attention_path_name(AttentionPath p) {
  switch (p) {
    case AttentionPath::simple: return "simple";
    case AttentionPath::fused: return "fused";
    case AttentionPath::cudnn: return "cudnn";
  }
  return "?";
}

// The values --attention takes, in the order help texts list them (auto, the default, is named apart).
constexpr const char* kAttentionFlagValues = "simple|fused|cudnn";

// Throws the flag's one-line error unless `flag` is auto, simple, fused or cudnn.
inline void check_attention_flag(const std::string& flag) {
  GPT_CHECK(flag == "auto" || flag == "simple" || flag == "fused" || flag == "cudnn",
            "--attention: expected auto, simple, fused or cudnn, got '", flag, "'");
}

// ---- fused ------------------------------------------------------------------------------------------
// The head sizes C / NH the fused kernels are instantiated for (a tile holds one head's 32 or 64 channels).
constexpr int kFusedAttentionHeadSizes[] = {32, 64};

inline bool fused_attention_supports_head_size(int hs) {
  for (int s : kFusedAttentionHeadSizes)
    if (hs == s) return true;
  return false;
}

// Throws the flag's one-line error unless C splits into NH heads of a size the fused kernels have.
inline void check_fused_attention_heads(int C, int NH) {
  GPT_CHECK(NH > 0 && C % NH == 0, "--attention fused: channels ", C, " not divisible by heads ", NH);
  const int hs = C / NH;
  GPT_CHECK(fused_attention_supports_head_size(hs), "--attention fused: supports head sizes 32 and 64, this model has ",
            hs, " (use --attention simple)");
}

// ---- cudnn ------------------------------------------------------------------------------------------
// What the cuDNN path needs to know about the device it would run on.
struct CudnnAttentionTarget {
  bool built = false;         // this build links cuDNN (GPT_WITH_CUDNN)
  int cc_major = 0;           // compute capability of the GPU
  int cc_minor = 0;
  long long version = 0;      // cudnnGetVersion() of the library loaded (9.19.0 = 91900)
};

// The cuDNN versions the path runs on, from NVIDIA's own frontend (cudnn-frontend's sdpa_backward checks):
//  - 9.8 or newer, the floor CMake builds against (the deviceless planning of attention_cudnn_graph.cu);
//  - not 9.10.0 or 9.10.1, whose bf16 backward has known bugs (the frontend refuses them);
//  - before 9.16, the backward only where T is a multiple of 128: below that the frontend adds a padding-mask
//    workaround to the backward graph for other T (a known bug of those versions), which this path does
//    not build (cudnn_attention_sequence_unsupported).
constexpr long long kCudnnAttentionMinVersion = 90800;
constexpr long long kCudnnAttentionAnyTVersion = 91600;

// The value the causal mask writes over the scores above the diagonal, by cuDNN version, as NVIDIA's frontend
// chooses it (cudnn-frontend attn_score_modifiers: "older cuDNN version prefers lowest for softmax mask"): the
// lowest finite float before 9.10, -infinity from 9.10 on.
inline float cudnn_attention_mask_value(long long version) {
  return version < 91000 ? -std::numeric_limits<float>::max() : -std::numeric_limits<float>::infinity();
}

inline std::string cudnn_version_name(long long v) {
  return str(v / 10000, ".", v / 100 % 100, ".", v % 100);
}

// Why the cudnn path cannot train at sequence length T on cuDNN `version`, or "" when it can (T = 1 runs
// the path's closed form, cuda::cudnn_attention_closed_form, and needs no plan).
inline std::string cudnn_attention_sequence_unsupported(long long T, long long version) {
  if (T <= 1 || version >= kCudnnAttentionAnyTVersion || T % 128 == 0) return "";
  return str("cuDNN ", cudnn_version_name(version), " trains only sequence lengths that are multiples of 128 ",
             "(9.16 or newer takes any), T is ", T);
}

// Throws that reason as a one-line error; where the plans of a shape are built (and memplan without a GPU).
inline void check_cudnn_attention_sequence(long long T, long long version) {
  const std::string why = cudnn_attention_sequence_unsupported(T, version);
  GPT_CHECK(why.empty(), "cuDNN backward attention: ", why);
}

// The largest head size the cuDNN flash-attention engines take in training (forward and backward), by
// architecture: 256 on Hopper (compute capability 9.x), 128 on Ampere, Ada and Blackwell (cuDNN's published
// support surface for fp16/bf16 SDPA: head sizes multiples of 8, at most 128, 256 on sm_90 for both passes).
inline int cudnn_attention_max_head_size(int cc_major) { return cc_major == 9 ? 256 : 128; }

// Why the cudnn path cannot run a model of C channels in NH heads on `t`, as the end of a one-line error,
// or "" when it can. Sequence lengths are limited only before cuDNN 9.16, per shape when its plans are built
// (cudnn_attention_sequence_unsupported); T = 1 (which cuDNN's backward refuses) runs the path's closed form
// (cuda::cudnn_attention_closed_form).
inline std::string cudnn_attention_unsupported(int C, int NH, const CudnnAttentionTarget& t) {
  if (!t.built) return "this build has no cuDNN (rebuild where CMake finds libcudnn)";
  if (NH <= 0 || C % NH != 0) return str("channels ", C, " not divisible by heads ", NH);
  const int hs = C / NH, max_hs = cudnn_attention_max_head_size(t.cc_major);
  if (t.cc_major < 8) return str("needs compute capability 8.0 or newer, this GPU has ", t.cc_major, ".", t.cc_minor);
  if (t.version < kCudnnAttentionMinVersion)
    return str("needs cuDNN 9.8 or newer, the loaded library is ", cudnn_version_name(t.version));
  if (t.version == 91000 || t.version == 91001)
    return str("cuDNN ", cudnn_version_name(t.version), " has known bugs in its attention backward (use 9.10.2 or ",
               "newer)");
  if (hs % 8 != 0 || hs > max_hs)
    return str("supports head sizes that are multiples of 8 up to ", max_hs, " on compute capability ", t.cc_major,
               ".x, this model has ", hs);
  return "";
}

// ---- resolving --attention --------------------------------------------------------------------------
// The device an --attention flag is resolved against: a cuda device (and its cuDNN), or not.
struct AttentionTarget {
  bool cuda = false;
  CudnnAttentionTarget cudnn;
};

// --attention for a model of C channels in NH heads on `t`: auto picks cudnn where it is supported, else
// fused where it is, else simple; an explicit path the target lacks throws the flag's one-line error.
inline AttentionPath resolve_attention_path(const std::string& flag, const AttentionTarget& t, int C, int NH) {
  check_attention_flag(flag);
  if (flag == "simple") return AttentionPath::simple;
  if (flag == "auto") {
    if (!t.cuda) return AttentionPath::simple;
    if (cudnn_attention_unsupported(C, NH, t.cudnn).empty()) return AttentionPath::cudnn;
    if (NH > 0 && C % NH == 0 && fused_attention_supports_head_size(C / NH)) return AttentionPath::fused;
    return AttentionPath::simple;
  }
  GPT_CHECK(t.cuda, "--attention ", flag, ": the cpu backend has only the simple path (use --device cuda)");
  if (flag == "fused") {
    check_fused_attention_heads(C, NH);
    return AttentionPath::fused;
  }
  const std::string why = cudnn_attention_unsupported(C, NH, t.cudnn);
  GPT_CHECK(why.empty(), "--attention cudnn: ", why, " (use --attention fused or simple)");
  return AttentionPath::cudnn;
}

// Where --attention auto chose cudnn and cuDNN then could not plan a shape (no engine for it on this GPU),
// the path auto would have chosen without cuDNN.
inline AttentionPath attention_fallback_without_cudnn(int C, int NH) {
  return NH > 0 && C % NH == 0 && fused_attention_supports_head_size(C / NH) ? AttentionPath::fused
                                                                              : AttentionPath::simple;
}

}  // namespace gpt
