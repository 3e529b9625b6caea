// The token-shard loader against its definition: batches are slices of a synthetic token stream computed
// here (shards written by a hand-rolled writer, expected offsets listed by hand), rank slicing equals one
// process with a world-times larger batch, positions resume exactly, and every kind of bad shard is a
// one-line error naming the file.
#include <gtest/gtest.h>

#include "tests/common/error_of.h"

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "tests/common/test_paths.h"
#include "src/core/check.h"
#include "src/io/data_loader.h"

namespace {

// Writes a shard byte by byte from the format description, with every header field under test control.
void write_raw_shard(const std::string& path, const std::vector<uint16_t>& ids, int32_t magic = 20240520,
                     int32_t version = 1, int64_t header_ntok = -1, size_t drop_bytes = 0) {
  int32_t h[256] = {0};
  h[0] = magic;
  h[1] = version;
  h[2] = (int32_t)(header_ntok >= 0 ? header_ntok : (int64_t)ids.size());
  std::string bytes(reinterpret_cast<const char*>(h), sizeof h);
  bytes.append(reinterpret_cast<const char*>(ids.data()), ids.size() * 2);
  bytes.resize(bytes.size() - drop_bytes);
  FILE* f = std::fopen(path.c_str(), "wb");
  ASSERT_NE(f, nullptr);
  std::fwrite(bytes.data(), 1, bytes.size(), f);
  std::fclose(f);
}

// Token at position i of shard s: distinct across shards and positions, below 1000.
uint16_t token(int s, int64_t i) { return (uint16_t)((s * 397 + i * 7 + 3) % 1000); }

std::vector<uint16_t> make_tokens(int s, int64_t n) {
  std::vector<uint16_t> v(n);
  for (int64_t i = 0; i < n; i++) v[i] = token(s, i);
  return v;
}

using gpt::test::error_of;

struct Batch {
  std::vector<int> x, y;
};

Batch next(gpt::DataLoader& dl, int B, int T) {
  Batch b{std::vector<int>(B * T), std::vector<int>(B * T)};
  dl.next_batch(b.x.data(), b.y.data());
  return b;
}

// Expects the batch to be the B*T tokens of shard s from offset o, targets shifted by one.
void expect_slice(const Batch& b, int s, int64_t o) {
  for (size_t i = 0; i < b.x.size(); i++) {
    ASSERT_EQ(b.x[i], token(s, o + (int64_t)i)) << "shard " << s << " offset " << o << " i " << i;
    ASSERT_EQ(b.y[i], token(s, o + (int64_t)i + 1)) << "shard " << s << " offset " << o << " i " << i;
  }
}

}  // namespace

TEST(DataLoader, SequentialBatchesWrapInOneShard) {
  const std::string dir = gpt::test::scratch_dir();
  write_raw_shard(dir + "/train_000000.bin", make_tokens(0, 50));
  gpt::DataLoader dl(dir + "/train_*.bin", /*B=*/2, /*T=*/4);
  EXPECT_EQ(dl.total_tokens(), 50);
  // 8 tokens per batch (+1 for targets): offsets 0..40 fit in 50 tokens, 48 + 9 > 50 wraps.
  for (int64_t o : {0, 8, 16, 24, 32, 40, 0, 8}) expect_slice(next(dl, 2, 4), 0, o);
}

TEST(DataLoader, MovesAcrossTwoShardsAndWraps) {
  const std::string dir = gpt::test::scratch_dir();
  write_raw_shard(dir + "/d_001.bin", make_tokens(1, 21));  // sorted second despite being written first
  write_raw_shard(dir + "/d_000.bin", make_tokens(0, 30));
  gpt::DataLoader dl(dir + "/d_*.bin", /*B=*/1, /*T=*/5);
  ASSERT_EQ(dl.files().size(), 2u);
  EXPECT_EQ(dl.files()[0], dir + "/d_000.bin");
  EXPECT_EQ(dl.total_tokens(), 51);
  // Shard 0 (30 tokens): offsets 0..20 (20 + 6 <= 30). Shard 1 (21 tokens): 0..15 (15 + 6 == 21).
  const std::vector<std::pair<int, int64_t>> expected = {{0, 0},  {0, 5},  {0, 10}, {0, 15}, {0, 20}, {1, 0},
                                                         {1, 5},  {1, 10}, {1, 15}, {0, 0},  {0, 5}};
  for (auto [s, o] : expected) {
    gpt::DataPosition p = dl.position();
    EXPECT_EQ(p.shard, s);
    EXPECT_EQ(p.offset, o);
    expect_slice(next(dl, 1, 5), s, o);
  }
}

TEST(DataLoader, RankSlicesConcatenateToOneProcessBatch) {
  const std::string dir = gpt::test::scratch_dir();
  write_raw_shard(dir + "/s_0.bin", make_tokens(0, 301));
  write_raw_shard(dir + "/s_1.bin", make_tokens(1, 123));
  const int B = 2, T = 3;
  for (int world : {1, 2, 4}) {
    gpt::DataLoader ref(dir + "/s_*.bin", B * world, T);
    std::vector<std::unique_ptr<gpt::DataLoader>> ranks;
    for (int r = 0; r < world; r++) ranks.emplace_back(new gpt::DataLoader(dir + "/s_*.bin", B, T, r, world));
    for (int step = 0; step < 40; step++) {  // enough to cross both shards and wrap
      Batch whole = next(ref, B * world, T);
      for (int r = 0; r < world; r++) {
        Batch part = next(*ranks[r], B, T);
        for (int i = 0; i < B * T; i++) {
          ASSERT_EQ(part.x[i], whole.x[r * B * T + i]) << "world " << world << " rank " << r << " step " << step;
          ASSERT_EQ(part.y[i], whole.y[r * B * T + i]) << "world " << world << " rank " << r << " step " << step;
        }
        EXPECT_EQ(ranks[r]->position().shard, ref.position().shard);
        EXPECT_EQ(ranks[r]->position().offset, ref.position().offset);
      }
    }
  }
}

TEST(DataLoader, RankRowsAreTheDefinedSlice) {
  const std::string dir = gpt::test::scratch_dir();
  write_raw_shard(dir + "/s.bin", make_tokens(0, 100));
  // world 3, B 2, T 4: global micro-batch 24 tokens; rank 2 takes tokens [16, 24) (+1 for the target).
  gpt::DataLoader dl(dir + "/s.bin", 2, 4, /*rank=*/2, /*world=*/3);
  expect_slice(next(dl, 2, 4), 0, 16);
  expect_slice(next(dl, 2, 4), 0, 24 + 16);
}

TEST(DataLoader, PositionResumesExactly) {
  const std::string dir = gpt::test::scratch_dir();
  write_raw_shard(dir + "/a.bin", make_tokens(0, 40));
  write_raw_shard(dir + "/b.bin", make_tokens(1, 33));
  gpt::DataLoader dl(dir + "/*.bin", 2, 3);
  std::vector<Batch> seq;
  std::vector<gpt::DataPosition> pos;
  for (int i = 0; i < 15; i++) {
    pos.push_back(dl.position());
    seq.push_back(next(dl, 2, 3));
  }
  for (int start : {0, 4, 6, 11}) {
    gpt::DataLoader other(dir + "/*.bin", 2, 3);
    other.set_position(pos[start]);
    for (int i = start; i < 15; i++) {
      Batch b = next(other, 2, 3);
      ASSERT_EQ(b.x, seq[i].x) << "resumed at " << start << ", batch " << i;
      ASSERT_EQ(b.y, seq[i].y) << "resumed at " << start << ", batch " << i;
    }
  }
  dl.reset();
  EXPECT_EQ(next(dl, 2, 3).x, seq[0].x);
}

TEST(DataLoader, SetPositionValidates) {
  const std::string dir = gpt::test::scratch_dir();
  write_raw_shard(dir + "/a.bin", make_tokens(0, 40));
  gpt::DataLoader dl(dir + "/a.bin", 2, 3);
  EXPECT_THROW(dl.set_position({1, 0}), gpt::Error);
  EXPECT_THROW(dl.set_position({-1, 0}), gpt::Error);
  EXPECT_THROW(dl.set_position({0, -1}), gpt::Error);
  EXPECT_THROW(dl.set_position({0, 41}), gpt::Error);
  // An offset whose remainder can't hold a batch (saved with another batch shape) moves to the next shard.
  dl.set_position({0, 38});
  EXPECT_EQ(dl.position().offset, 0);
  dl.set_position({0, 5});
  expect_slice(next(dl, 2, 3), 0, 5);
}

TEST(DataLoader, VocabCheckPassesWhenIdsFit) {
  const std::string dir = gpt::test::scratch_dir();
  write_raw_shard(dir + "/a.bin", make_tokens(0, 40));  // ids < 1000
  EXPECT_NO_THROW(gpt::DataLoader(dir + "/a.bin", 2, 3, 0, 1, 1000));
}

TEST(TokenShard, WriteReadRoundTripAndByteLayout) {
  const std::string path = gpt::test::scratch_dir() + "/t.bin";
  std::vector<int> ids = {0, 1, 65535, 50256, 256, 7};
  gpt::write_token_shard(path, ids);
  std::vector<uint16_t> back = gpt::read_token_shard(path);
  ASSERT_EQ(back.size(), ids.size());
  for (size_t i = 0; i < ids.size(); i++) EXPECT_EQ(back[i], ids[i]);
  // The bytes follow the format: header [20240520, 1, 6, 0...] then little-endian uint16.
  FILE* f = std::fopen(path.c_str(), "rb");
  ASSERT_NE(f, nullptr);
  std::vector<unsigned char> raw(2000);
  size_t n = std::fread(raw.data(), 1, raw.size(), f);
  std::fclose(f);
  ASSERT_EQ(n, 1024u + 12u);
  int32_t h[256];
  std::memcpy(h, raw.data(), sizeof h);
  EXPECT_EQ(h[0], 20240520);
  EXPECT_EQ(h[1], 1);
  EXPECT_EQ(h[2], 6);
  for (int i = 3; i < 256; i++) EXPECT_EQ(h[i], 0);
  EXPECT_EQ(raw[1024 + 4], 0xFF);
  EXPECT_EQ(raw[1024 + 5], 0xFF);
  EXPECT_EQ(raw[1024 + 6] | raw[1024 + 7] << 8, 50256);
}

TEST(TokenShard, WriteRejectsIdsOutsideUint16AndEmpty) {
  const std::string path = gpt::test::scratch_dir() + "/t.bin";
  EXPECT_THROW(gpt::write_token_shard(path, {1, 65536}), gpt::Error);
  EXPECT_THROW(gpt::write_token_shard(path, {-1}), gpt::Error);
  EXPECT_THROW(gpt::write_token_shard(path, {}), gpt::Error);
  EXPECT_NE(error_of([&] { gpt::write_token_shard(path, {3, 70000}); }).find("offset 1"), std::string::npos);
}

// ---- bad shards: each is an error naming the file ------------------------------------------------

class BadShard : public ::testing::Test {
 protected:
  void SetUp() override {
    dir = gpt::test::scratch_dir();
    path = dir + "/bad.bin";
  }
  // The loader (B=2, T=8, vocab as given) and read_token_shard must both fail, naming the file.
  std::string expect_loader_error(int vocab = 0, bool also_reader = true) {
    std::string msg = error_of([&] { gpt::DataLoader dl(path, 2, 8, 0, 1, vocab); });
    EXPECT_NE(msg.find(path), std::string::npos) << msg;
    if (also_reader) {
      std::string rmsg = error_of([&] { gpt::read_token_shard(path); });
      EXPECT_NE(rmsg.find(path), std::string::npos) << rmsg;
    }
    return msg;
  }
  std::string dir, path;
};

TEST_F(BadShard, WrongMagic) {
  write_raw_shard(path, make_tokens(0, 100), /*magic=*/20240326);
  EXPECT_NE(expect_loader_error().find("magic"), std::string::npos);
}

TEST_F(BadShard, WrongVersion) {
  write_raw_shard(path, make_tokens(0, 100), 20240520, /*version=*/2);
  EXPECT_NE(expect_loader_error().find("version"), std::string::npos);
}

TEST_F(BadShard, TruncatedTokens) {
  write_raw_shard(path, make_tokens(0, 100), 20240520, 1, -1, /*drop_bytes=*/1);
  EXPECT_NE(expect_loader_error().find("1224"), std::string::npos);  // names the expected size
}

TEST_F(BadShard, HeaderClaimsMoreTokens) {
  write_raw_shard(path, make_tokens(0, 100), 20240520, 1, /*header_ntok=*/101);
  expect_loader_error();
}

TEST_F(BadShard, ShorterThanHeader) {
  write_raw_shard(path, {}, 20240520, 1, 0, /*drop_bytes=*/1000);
  expect_loader_error();
}

TEST_F(BadShard, ZeroTokens) {
  write_raw_shard(path, {}, 20240520, 1, 0);
  EXPECT_NE(expect_loader_error().find("0 tokens"), std::string::npos);
}

TEST_F(BadShard, NegativeTokenCount) {
  write_raw_shard(path, make_tokens(0, 10), 20240520, 1, /*header_ntok=*/0x80000000LL);
  expect_loader_error();
}

TEST_F(BadShard, TooShortForOneBatch) {
  write_raw_shard(path, make_tokens(0, 16), 20240520, 1);  // B*T + 1 = 17 needed
  std::string msg = expect_loader_error(0, /*also_reader=*/false);
  EXPECT_NE(msg.find("17"), std::string::npos) << msg;
  EXPECT_NO_THROW(gpt::read_token_shard(path));  // a valid shard, just too short for this batch
  write_raw_shard(path, make_tokens(0, 17), 20240520, 1);
  EXPECT_NO_THROW(gpt::DataLoader(path, 2, 8));
  // With two ranks the global micro-batch is 33 tokens.
  EXPECT_THROW(gpt::DataLoader(path, 2, 8, 1, 2), gpt::Error);
}

TEST_F(BadShard, IdAboveVocabNamesTheOffset) {
  std::vector<uint16_t> ids = make_tokens(0, 100);
  for (auto& v : ids) v %= 300;
  ids[37] = 300;
  write_raw_shard(path, ids);
  std::string msg = expect_loader_error(/*vocab=*/300, /*also_reader=*/false);
  EXPECT_NE(msg.find("offset 37"), std::string::npos) << msg;
  EXPECT_NO_THROW(gpt::DataLoader(path, 2, 8, 0, 1, 301));
  EXPECT_NO_THROW(gpt::DataLoader(path, 2, 8));  // no vocab given: no check
}

// Every shard's ids are checked when the loader is built, so a bad id anywhere stops the run before
// training starts, naming the file and the token offset.
TEST_F(BadShard, BadIdInSecondShardFailsAtStart) {
  write_raw_shard(dir + "/a_0.bin", make_tokens(0, 20));
  std::vector<uint16_t> ids(20, 5);
  ids[3] = 999;
  write_raw_shard(dir + "/a_1.bin", ids);
  std::string msg = error_of([&] { gpt::DataLoader dl(dir + "/a_*.bin", 2, 8, 0, 1, 998); });
  EXPECT_NE(msg.find(dir + "/a_1.bin"), std::string::npos) << msg;
  EXPECT_NE(msg.find("offset 3"), std::string::npos) << msg;
}

TEST_F(BadShard, BadHeaderInSecondShardFailsAtStart) {
  write_raw_shard(dir + "/a_0.bin", make_tokens(0, 100));
  write_raw_shard(dir + "/a_1.bin", make_tokens(0, 100), 1234);
  std::string msg = error_of([&] { gpt::DataLoader dl(dir + "/a_*.bin", 2, 8); });
  EXPECT_NE(msg.find(dir + "/a_1.bin"), std::string::npos) << msg;
}

TEST_F(BadShard, MissingFileAndNoGlobMatch) {
  std::string msg = error_of([&] { gpt::DataLoader dl(path, 2, 8); });
  EXPECT_NE(msg.find(path), std::string::npos) << msg;
  const std::string pattern = dir + "/train_*.bin";
  msg = error_of([&] { gpt::DataLoader dl(pattern, 2, 8); });
  EXPECT_NE(msg.find(pattern), std::string::npos) << msg;
  msg = error_of([&] { gpt::read_token_shard(path); });
  EXPECT_NE(msg.find(path), std::string::npos) << msg;
}

TEST_F(BadShard, BadLoaderArguments) {
  write_raw_shard(path, make_tokens(0, 100));
  EXPECT_THROW(gpt::DataLoader(path, 0, 8), gpt::Error);
  EXPECT_THROW(gpt::DataLoader(path, 2, -1), gpt::Error);
  EXPECT_THROW(gpt::DataLoader(path, 2, 8, 2, 2), gpt::Error);
  EXPECT_THROW(gpt::DataLoader(path, 2, 8, -1, 2), gpt::Error);
}
