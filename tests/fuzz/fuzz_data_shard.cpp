// libFuzzer harness for the token-shard readers (io/data_loader.h): read_token_shard and DataLoader.
// Input: 10 parameter bytes, then up to 3 shard files separated by kSeparator.
//   [0] B = 1 + x%4   [1] T = 1 + x%16   [2] world = 1 + x%4   [3] rank = x % world
//   [4,5] vocab size (uint16 LE, 0 = no id check)   [6] batches to draw = x%16
//   [7] bit 0: call set_position(shard = (x>>1)&3, offset = int16 LE of [8,9]) then draw one more batch.
// Whenever the loader accepts the files, every batch is checked against the documented semantics
// (data_loader.h) using the ids read_token_shard returned: rank r's rows start at offset + r*B*T,
// targets are inputs shifted by one, and the position advances by world*B*T or moves to the next shard.
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "tests/fuzz/fuzz_util.h"
#include "src/io/data_loader.h"

namespace {

using gpt::fuzz::byte_at;

constexpr size_t kParamBytes = 10;
constexpr int kMaxShards = 3;

std::string shard_path(int i) { return gpt::fuzz::scratch_dir() + "/shard_" + std::to_string(i) + ".bin"; }

struct Params {
  int B, T, world, rank, vocab, batches;
  bool seek;
  gpt::DataPosition seek_to;
};

Params parse_params(std::string_view in) {
  Params p;
  p.B = 1 + byte_at(in, 0) % 4;
  p.T = 1 + byte_at(in, 1) % 16;
  p.world = 1 + byte_at(in, 2) % 4;
  p.rank = byte_at(in, 3) % p.world;
  p.vocab = byte_at(in, 4) | byte_at(in, 5) << 8;
  p.batches = byte_at(in, 6) % 16;
  p.seek = byte_at(in, 7) & 1;
  p.seek_to.shard = (byte_at(in, 7) >> 1) & 3;
  p.seek_to.offset = static_cast<int16_t>(byte_at(in, 8) | byte_at(in, 9) << 8);
  return p;
}

// Draws one batch and checks it, and the position that follows, against the shard ids.
void draw_and_check(gpt::DataLoader& loader, const Params& p, const std::vector<std::vector<uint16_t>>& ids) {
  const int64_t n = (int64_t)p.B * p.T, global = n * p.world;
  const gpt::DataPosition pos = loader.position();
  FUZZ_REQUIRE(pos.shard >= 0 && pos.shard < (int64_t)ids.size(), "position shard ", pos.shard, " out of range");
  const std::vector<uint16_t>& tok = ids[(size_t)pos.shard];  // (ntok,)
  const int64_t base = pos.offset + p.rank * n;
  FUZZ_REQUIRE(pos.offset >= 0 && pos.offset + global + 1 <= (int64_t)tok.size(), "position ", pos.shard, ":",
               pos.offset, " leaves no room for a global batch of ", global, " + 1 in ", tok.size(), " tokens");
  std::vector<int> inputs((size_t)n), targets((size_t)n);  // (B*T) each
  loader.next_batch(inputs.data(), targets.data());
  for (int64_t i = 0; i < n; i++) {
    FUZZ_REQUIRE(inputs[(size_t)i] == tok[(size_t)(base + i)], "input ", i, " differs from the shard");
    FUZZ_REQUIRE(targets[(size_t)i] == tok[(size_t)(base + i + 1)], "target ", i, " differs from the shard");
    FUZZ_REQUIRE(p.vocab == 0 || inputs[(size_t)i] < p.vocab, "id ", inputs[(size_t)i], " >= vocab ", p.vocab,
                 " passed the loader's range check");
  }
  gpt::DataPosition want{pos.shard, pos.offset + global};
  if (want.offset + global + 1 > (int64_t)tok.size()) want = {(pos.shard + 1) % (int64_t)ids.size(), 0};
  const gpt::DataPosition got = loader.position();
  FUZZ_REQUIRE(got.shard == want.shard && got.offset == want.offset, "position after a batch is ", got.shard, ":",
               got.offset, ", expected ", want.shard, ":", want.offset);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view in(reinterpret_cast<const char*>(data), size);
  const Params p = parse_params(in);
  const std::vector<std::string_view> files =
      gpt::fuzz::split(in.substr(std::min(size, kParamBytes)), kMaxShards);
  for (int i = 0; i < kMaxShards; i++) gpt::fuzz::remove_file(shard_path(i));
  for (size_t i = 0; i < files.size(); i++) gpt::fuzz::write_bytes(shard_path((int)i), files[i]);

  std::vector<std::vector<uint16_t>> ids(files.size());  // per shard: (ntok,)
  std::vector<bool> readable(files.size(), false);
  for (size_t i = 0; i < files.size(); i++)
    readable[i] = gpt::fuzz::expect_ok_or_error([&] { ids[i] = gpt::read_token_shard(shard_path((int)i)); });

  gpt::fuzz::expect_ok_or_error([&] {
    gpt::DataLoader loader(gpt::fuzz::scratch_dir() + "/shard_*.bin", p.B, p.T, p.rank, p.world, p.vocab);
    int64_t total = 0;
    for (size_t i = 0; i < files.size(); i++) {
      FUZZ_REQUIRE(readable[i], "the loader accepted shard ", i, " which read_token_shard rejects");
      total += (int64_t)ids[i].size();
    }
    FUZZ_REQUIRE(loader.total_tokens() == total, "total_tokens ", loader.total_tokens(), " != ", total);
    for (int b = 0; b < p.batches; b++) draw_and_check(loader, p, ids);
    if (p.seek) {
      loader.set_position(p.seek_to);  // may throw gpt::Error for an out-of-range position
      draw_and_check(loader, p, ids);
    }
  });
  return 0;
}
