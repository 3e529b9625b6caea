// The tensors of the cudnn attention path as cuDNN sees them, and the key its execution plans are cached
// under. Plain C++ (no CUDA or cuDNN types), so the host tests check both without a GPU.
//
// Layout. Our activations are packed: qkv (B, T, 3C) holds, per token, q then k then v, each C = NH * hs
// channels with head h at columns [h*hs, (h+1)*hs) (the index map of attention.cu); out and dout are (B, T, C);
// dqkv is laid out like qkv. cuDNN takes every tensor as (B, NH, T, hs) dims with arbitrary strides, so each
// is a strided view into our buffers, with no copy:
//   q, k, v, dq, dk, dv   dims (B, NH, T, hs)  strides (T*3C, hs, 3C, 1)  at element 0, C, 2C of (d)qkv
//   out, dout             dims (B, NH, T, hs)  strides (T*C,  hs, C,  1)
//   kt, vt                k and v transposed for the products q k^T and dout v^T: dims (B, NH, hs, T),
//                         strides (T*3C, hs, 1, 3C) (the same memory as k and v)
//   stats                 dims (B, NH, T, 1) fp32, strides (NH*T, T, 1, 1): the (B, NH, T) row log-sum-exp
//                         the fused path keeps too
// Element (b, h, t, d) of a view is at sum_i index_i * stride_i from its base (offset_of below).
//
// Plans. A plan (operation graph, engine config, execution plan, workspace size) depends on the direction,
// the dims and the strides of every tensor, and on nothing that changes per call (pointers, the scale value).
// Our strides follow from (B, T, NH, hs), but they are part of the key so that a caller with another layout
// can never be handed a plan built for this one.
#pragma once
#include <cstddef>
#include <cstdint>

namespace gpt::cuda {

// One 4-D tensor view: dims and strides in elements, outermost first.
struct SdpaView {
  int64_t dim[4] = {0, 0, 0, 0};
  int64_t stride[4] = {0, 0, 0, 0};
};

inline int64_t offset_of(const SdpaView& v, int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
  return i0 * v.stride[0] + i1 * v.stride[1] + i2 * v.stride[2] + i3 * v.stride[3];
}

// The views of one attention call on our packed buffers (see the top of this file).
struct SdpaLayout {
  SdpaView q, k, v;      // also dq, dk, dv in dqkv
  SdpaView kt, vt;       // k and v transposed: (B, NH, hs, T)
  SdpaView o;            // out and dout
  SdpaView stats;        // (B, NH, T, 1) fp32
  int64_t k_offset = 0;  // elements from the base of (d)qkv to its k (and dk) part
  int64_t v_offset = 0;  // ... to its v part
};

inline SdpaLayout packed_sdpa_layout(int64_t B, int64_t T, int64_t NH, int64_t hs) {
  const int64_t C = NH * hs, row3 = 3 * C;
  SdpaLayout l;
  l.q = {{B, NH, T, hs}, {T * row3, hs, row3, 1}};
  l.k = l.q;
  l.v = l.q;
  l.kt = {{B, NH, hs, T}, {T * row3, hs, 1, row3}};
  l.vt = l.kt;
  l.o = {{B, NH, T, hs}, {T * C, hs, C, 1}};
  l.stats = {{B, NH, T, 1}, {NH * T, T, 1, 1}};
  l.k_offset = C;
  l.v_offset = 2 * C;
  return l;
}

// What one cached plan depends on.
struct SdpaKey {
  bool backward = false;
  int64_t B = 0, T = 0, NH = 0, hs = 0;
  int64_t qkv_stride[4] = {0, 0, 0, 0};    // q, k, v (and dq, dk, dv)
  int64_t o_stride[4] = {0, 0, 0, 0};      // out, dout
  int64_t stats_stride[4] = {0, 0, 0, 0};  // the log-sum-exp

  bool operator==(const SdpaKey& o) const {
    if (backward != o.backward || B != o.B || T != o.T || NH != o.NH || hs != o.hs) return false;
    for (int i = 0; i < 4; i++)
      if (qkv_stride[i] != o.qkv_stride[i] || o_stride[i] != o.o_stride[i] || stats_stride[i] != o.stats_stride[i])
        return false;
    return true;
  }
  bool operator!=(const SdpaKey& o) const { return !(*this == o); }
};

inline SdpaKey sdpa_key(bool backward, const SdpaLayout& l) {
  SdpaKey k;
  k.backward = backward;
  k.B = l.q.dim[0], k.NH = l.q.dim[1], k.T = l.q.dim[2], k.hs = l.q.dim[3];
  for (int i = 0; i < 4; i++) {
    k.qkv_stride[i] = l.q.stride[i];
    k.o_stride[i] = l.o.stride[i];
    k.stats_stride[i] = l.stats.stride[i];
  }
  return k;
}

struct SdpaKeyHash {
  size_t operator()(const SdpaKey& k) const {
    uint64_t h = 1469598103934665603ull;  // FNV-1a over the fields, one 64-bit word each
    auto mix = [&h](uint64_t v) {
      for (int i = 0; i < 8; i++) {
        h ^= (v >> (8 * i)) & 0xffu;
        h *= 1099511628211ull;
      }
    };
    mix(k.backward ? 1 : 0);
    const int64_t dims[] = {k.B, k.T, k.NH, k.hs};
    for (int64_t v : dims) mix(static_cast<uint64_t>(v));
    for (int i = 0; i < 4; i++) {
      mix(static_cast<uint64_t>(k.qkv_stride[i]));
      mix(static_cast<uint64_t>(k.o_stride[i]));
      mix(static_cast<uint64_t>(k.stats_stride[i]));
    }
    return static_cast<size_t>(h);
  }
};

}  // namespace gpt::cuda
