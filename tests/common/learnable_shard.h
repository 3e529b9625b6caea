// A training shard a small model can learn from in a few steps: a repeating pattern (token i*7 mod V)
// with 20% uniform noise, written as dir/train_000000.bin. Returns the path.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "src/core/rng.h"
#include "src/io/data_loader.h"

namespace gpt::test {

inline std::string write_learnable_shard(const std::string& dir, int V, int n, uint64_t seed) {
  Rng rng(seed);
  std::vector<int> toks(n);
  for (int i = 0; i < n; i++) toks[i] = rng.uniform() < 0.8f ? (i * 7 % V) : static_cast<int>(rng.next_u64() % V);
  const std::string path = dir + "/train_000000.bin";
  write_token_shard(path, toks);
  return path;
}

}  // namespace gpt::test
