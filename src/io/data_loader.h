// Reads llm.c token shards: a 256 x int32 header [20240520, 1, ntok, 0...] then ntok uint16 ids; the file
// size must be exactly 1024 + 2*ntok bytes. Batches are sequential with wrap-around.
//
// Global batch: each call to next_batch() consumes one *global* micro-batch of world*B*T tokens (plus one
// for the shifted targets); rank r gets rows [r*B, (r+1)*B). So N ranks with micro-batch B see exactly the
// token sequences that one process with micro-batch N*B (or B with N accumulation steps) sees.
// When the rest of a shard cannot hold a global micro-batch, the loader moves to the next shard (after
// the last shard, back to the first).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace gpt {

struct DataPosition {
  int64_t shard = 0;   // index into the sorted shard list
  int64_t offset = 0;  // token offset of the next global micro-batch inside that shard
};

class DataLoader {
 public:
  // pattern: glob of shard files. vocab_size > 0 checks every id < vocab_size of every shard up front,
  // failing with the file and token offset of the first bad id. Throws gpt::Error on any invalid shard
  // (missing, bad magic/version, size mismatch, too few tokens for one global micro-batch).
  DataLoader(const std::string& pattern, int B, int T, int rank = 0, int world = 1, int vocab_size = 0);
  ~DataLoader();
  DataLoader(const DataLoader&) = delete;
  DataLoader& operator=(const DataLoader&) = delete;

  // inputs (B*T) and targets (B*T), host memory; targets are inputs shifted by one token.
  void next_batch(int* inputs, int* targets);
  void reset();
  DataPosition position() const;
  void set_position(const DataPosition& p);  // validated
  int64_t total_tokens() const;              // over all shards
  int64_t batches_per_pass() const;          // distinct global micro-batches before the data repeats
  // Throws, naming `flag`, when `wanted` batches would read some of the data twice (more than one pass).
  void check_batches(int64_t wanted, const std::string& flag) const;
  const std::vector<std::string>& files() const;

 private:
  struct Impl;
  Impl* impl_;
};

// Writes one shard atomically (ids must fit in uint16).
void write_token_shard(const std::string& path, const std::vector<int>& tokens);
// Reads and validates one whole shard (for tools and tests).
std::vector<uint16_t> read_token_shard(const std::string& path);

}  // namespace gpt
