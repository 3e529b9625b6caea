// Byte counts that saturate at INT64_MAX instead of wrapping. Sizes of buffers (activations, scratch,
// shards) are products of user-given dimensions; with these, an absurd request stays absurd (and is
// reported by whoever checks it against a limit) rather than wrapping to a small number.
#pragma once
#include <cstdint>
#include <initializer_list>

namespace gpt {

// The product of non-negative factors, or INT64_MAX when it does not fit.
inline int64_t sat_mul(std::initializer_list<int64_t> factors) {
  __int128 p = 1;
  for (int64_t f : factors) {
    p *= f < 0 ? 0 : f;
    if (p > INT64_MAX) return INT64_MAX;
  }
  return (int64_t)p;
}

// The sum of non-negative terms, or INT64_MAX when it does not fit.
inline int64_t sat_add(std::initializer_list<int64_t> terms) {
  __int128 s = 0;
  for (int64_t t : terms) s += t < 0 ? 0 : t;
  return s > INT64_MAX ? INT64_MAX : (int64_t)s;
}

}  // namespace gpt
