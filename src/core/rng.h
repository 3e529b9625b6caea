// Deterministic random numbers for init, data order and sampling. A 64-bit counter-free generator
// (splitmix64 seeding xoshiro256**) whose whole state is four words, so the training-state file can
// save and restore it exactly.
#pragma once
#include <cmath>
#include <cstdint>

namespace gpt {

struct Rng {
  uint64_t s[4];

  explicit Rng(uint64_t seed = 1337) { reseed(seed); }

  void reseed(uint64_t seed) {
    has_spare = 0;
    for (auto& w : s) {  // splitmix64
      seed += 0x9e3779b97f4a7c15ULL;
      uint64_t z = seed;
      z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
      z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
      w = z ^ (z >> 31);
    }
  }

  uint64_t next_u64() {  // xoshiro256**
    uint64_t result = rotl(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
  }

  // Uniform in [0, 1) with 24 bits, exact in float.
  float uniform() { return (next_u64() >> 40) * (1.0f / 16777216.0f); }
  // Uniform in [0, 1) with 53 bits.
  double uniform_double() { return (next_u64() >> 11) * (1.0 / 9007199254740992.0); }

  // Standard normal by Box-Muller: each pair of uniforms gives two draws (the second is kept for the next
  // call, and is part of the state that save/restore carries).
  double normal() {
    if (has_spare) {
      has_spare = 0;
      return spare;
    }
    double u1 = uniform_double(), u2 = uniform_double();
    if (u1 < 1e-300) u1 = 1e-300;
    const double r = std::sqrt(-2.0 * std::log(u1)), a = 6.283185307179586 * u2;
    spare = r * std::sin(a);
    has_spare = 1;
    return r * std::cos(a);
  }
  double spare = 0;
  uint64_t has_spare = 0;

 private:
  static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
};

}  // namespace gpt
