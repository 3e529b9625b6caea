// `gpt tokenize` preparation: with the byte tokenizer the expected shards are the input bytes themselves
// (plus EOT 256 between documents), so split, sharding and document joining are checked against values
// built here from the text. Piecewise encoding is checked against one whole-text encode with GPT-2 when
// its vocabulary files are present. Also the progress bar's text.
#include <gtest/gtest.h>

#include "tests/common/error_of.h"

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "tests/common/test_paths.h"
#include "src/core/check.h"
#include "src/io/data_loader.h"
#include "src/io/prepare.h"
#include "src/io/tokenizer.h"
#include "src/util/progress.h"

namespace fs = std::filesystem;

namespace {

using gpt::test::slurp;
using gpt::test::spit;

// Reads a shard from its byte layout (independent of read_token_shard).
std::vector<int> shard_ids(const std::string& path) {
  std::string b = slurp(path);
  EXPECT_GE(b.size(), 1024u) << path;
  std::vector<int> ids;
  for (size_t i = 1024; i + 1 < b.size(); i += 2) ids.push_back((unsigned char)b[i] | (unsigned char)b[i + 1] << 8);
  return ids;
}

std::vector<int> bytes_of(const std::string& s) {
  std::vector<int> v;
  for (unsigned char c : s) v.push_back(c);
  return v;
}

gpt::PrepareOptions byte_options(const std::string& input, const std::string& out) {
  gpt::PrepareOptions o;
  o.input = input;
  o.out_dir = out;
  o.tokenizer = "byte";
  o.data_dir = gpt::test::source_dir() + "/data";
  o.quiet = true;
  return o;
}

using gpt::test::error_of;

const char* kText = "First Citizen:\nBefore we proceed any further, hear me speak.\n\nAll:\nSpeak, speak.\n";

}  // namespace

TEST(Prepare, ByteSplitTakesTheLastFractionAsVal) {
  const std::string dir = gpt::test::scratch_dir();
  const std::string text = kText;  // 80 bytes
  spit(dir + "/in.txt", text);
  gpt::PrepareOptions o = byte_options(dir + "/in.txt", dir + "/out");
  o.val_fraction = 0.25;
  gpt::PrepareSummary s = gpt::prepare_dataset(o);
  const size_t n_val = (size_t)std::llround(text.size() * 0.25);
  ASSERT_EQ(s.train_files, std::vector<std::string>{dir + "/out/train_000000.bin"});
  ASSERT_EQ(s.val_files, std::vector<std::string>{dir + "/out/val_000000.bin"});
  EXPECT_EQ(s.train_tokens, (int64_t)(text.size() - n_val));
  EXPECT_EQ(s.val_tokens, (int64_t)n_val);
  EXPECT_EQ(shard_ids(s.train_files[0]), bytes_of(text.substr(0, text.size() - n_val)));
  EXPECT_EQ(shard_ids(s.val_files[0]), bytes_of(text.substr(text.size() - n_val)));
  // The shards are valid llm.c shards for the loader.
  EXPECT_NO_THROW(gpt::DataLoader(dir + "/out/train_*.bin", 2, 8, 0, 1, 257));
}

TEST(Prepare, ShardSizeSplitsEachSplit) {
  const std::string dir = gpt::test::scratch_dir();
  std::string text;
  for (int i = 0; i < 30; i++) text.push_back((char)('a' + i % 26));
  spit(dir + "/in.txt", text);
  gpt::PrepareOptions o = byte_options(dir + "/in.txt", dir + "/out");
  o.val_fraction = 0.1;  // 3 of 30 tokens
  o.shard_size = 7;
  gpt::PrepareSummary s = gpt::prepare_dataset(o);
  ASSERT_EQ(s.train_files.size(), 4u);  // 27 tokens: 7 + 7 + 7 + 6
  ASSERT_EQ(s.val_files.size(), 1u);
  std::vector<int> all;
  for (int k = 0; k < 4; k++) {
    char name[64];
    std::snprintf(name, sizeof name, "/out/train_%06d.bin", k);
    EXPECT_EQ(s.train_files[k], dir + name);
    auto ids = shard_ids(s.train_files[k]);
    EXPECT_EQ(ids.size(), k < 3 ? 7u : 6u);
    all.insert(all.end(), ids.begin(), ids.end());
  }
  EXPECT_EQ(all, bytes_of(text.substr(0, 27)));
  EXPECT_EQ(shard_ids(s.val_files[0]), bytes_of(text.substr(27)));
}

TEST(Prepare, DirectoryJoinsSortedDocumentsWithEot) {
  const std::string dir = gpt::test::scratch_dir();
  fs::create_directories(dir + "/docs");
  spit(dir + "/docs/b.txt", "second doc");
  spit(dir + "/docs/a.txt", "first");
  spit(dir + "/docs/notes.md", "ignored");
  gpt::PrepareOptions o = byte_options(dir + "/docs", dir + "/out");
  o.val_fraction = 0.0;
  gpt::PrepareSummary s = gpt::prepare_dataset(o);
  EXPECT_EQ(s.documents, 2);
  EXPECT_TRUE(s.val_files.empty());
  EXPECT_FALSE(fs::exists(dir + "/out/val_000000.bin"));
  std::vector<int> want = bytes_of("first");
  want.push_back(256);  // EOT between the documents, none before the first
  for (int b : bytes_of("second doc")) want.push_back(b);
  ASSERT_EQ(s.train_files.size(), 1u);
  EXPECT_EQ(shard_ids(s.train_files[0]), want);
}

TEST(Prepare, SmallPiecesGiveTheSameTokens) {
  const std::string dir = gpt::test::scratch_dir();
  std::string text;
  for (int i = 0; i < 50; i++) text += kText;
  spit(dir + "/in.txt", text);
  gpt::PrepareOptions o = byte_options(dir + "/in.txt", dir + "/out");
  o.val_fraction = 0.0;
  o.chunk_bytes = 16;
  gpt::PrepareSummary s = gpt::prepare_dataset(o);
  EXPECT_EQ(shard_ids(s.train_files[0]), bytes_of(text));
}

TEST(Prepare, Gpt2PiecesMatchWholeTextEncode) {
  const std::string data = gpt::test::source_dir() + "/data";
  if (!fs::exists(data + "/gpt2/encoder.json")) GTEST_SKIP() << "no data/gpt2 vocabulary";
  const std::string dir = gpt::test::scratch_dir();
  // Shakespeare plus the whitespace patterns where a careless cut would change GPT-2's pre-tokens.
  std::string text = slurp(data + "/tinyshakespeare/input.txt").substr(0, 12000);
  text += "trailing spaces  \nnext\n\n\nthree blank\t\n x\n\xC2\xA0\nnbsp\n 'tis\n'twas\n123\n456\n";
  spit(dir + "/in.txt", text);
  gpt::PrepareOptions o = byte_options(dir + "/in.txt", dir + "/out");
  o.tokenizer = "gpt2";
  o.val_fraction = 0.0;
  o.chunk_bytes = 64;
  gpt::PrepareSummary s = gpt::prepare_dataset(o);
  auto tok = gpt::make_tokenizer("gpt2", data);
  EXPECT_EQ(shard_ids(s.train_files[0]), tok->encode(text));
}

TEST(Prepare, RemovesStaleShardsOfAnEarlierRun) {
  const std::string dir = gpt::test::scratch_dir();
  spit(dir + "/in.txt", kText);
  fs::create_directories(dir + "/out");
  spit(dir + "/out/train_000009.bin", "old");
  spit(dir + "/out/val_000003.bin", "old");
  spit(dir + "/out/keep_me.bin", "user file");
  gpt::PrepareOptions o = byte_options(dir + "/in.txt", dir + "/out");
  gpt::prepare_dataset(o);
  EXPECT_FALSE(fs::exists(dir + "/out/train_000009.bin"));
  EXPECT_FALSE(fs::exists(dir + "/out/val_000003.bin"));
  EXPECT_TRUE(fs::exists(dir + "/out/keep_me.bin"));
  EXPECT_TRUE(fs::exists(dir + "/out/train_000000.bin"));
}

TEST(Prepare, BadOptionsNameTheFlag) {
  const std::string dir = gpt::test::scratch_dir();
  spit(dir + "/in.txt", kText);
  spit(dir + "/empty.txt", "");
  fs::create_directories(dir + "/nodocs");
  spit(dir + "/nodocs/readme.md", "x");
  auto msg_for = [&](auto edit) {
    gpt::PrepareOptions o = byte_options(dir + "/in.txt", dir + "/out");
    edit(o);
    return error_of([&] { gpt::prepare_dataset(o); });
  };
  using O = gpt::PrepareOptions;
  EXPECT_NE(msg_for([&](O& o) { o.input = dir + "/missing.txt"; }).find("--input"), std::string::npos);
  EXPECT_NE(msg_for([&](O& o) { o.input = ""; }).find("--input"), std::string::npos);
  EXPECT_NE(msg_for([&](O& o) { o.input = dir + "/empty.txt"; }).find("empty"), std::string::npos);
  EXPECT_NE(msg_for([&](O& o) { o.input = dir + "/nodocs"; }).find(".txt"), std::string::npos);
  EXPECT_NE(msg_for([&](O& o) { o.out_dir = ""; }).find("--out"), std::string::npos);
  EXPECT_NE(msg_for([&](O& o) { o.val_fraction = 1.0; }).find("--val-fraction"), std::string::npos);
  EXPECT_NE(msg_for([&](O& o) { o.val_fraction = -0.1; }).find("--val-fraction"), std::string::npos);
  EXPECT_NE(msg_for([&](O& o) { o.val_fraction = NAN; }).find("--val-fraction"), std::string::npos);
  EXPECT_NE(msg_for([&](O& o) { o.shard_size = 0; }).find("--shard-size"), std::string::npos);
  EXPECT_NE(msg_for([&](O& o) { o.shard_size = 1LL << 31; }).find("--shard-size"), std::string::npos);
  EXPECT_NE(msg_for([&](O& o) { o.tokenizer = "bpe"; }).find("--tokenizer"), std::string::npos);
  // Too little text for the requested split.
  spit(dir + "/tiny.txt", "ab");
  EXPECT_NE(msg_for([&](O& o) { o.input = dir + "/tiny.txt"; }).find("--val-fraction"), std::string::npos);
  EXPECT_FALSE(fs::exists(dir + "/out/train_000000.bin"));  // nothing written by failed runs
}

TEST(Progress, RenderShowsPercentRateAndEta) {
  gpt::ProgressBar bar("tokenize", 100000000, gpt::ProgressBar::Unit::Bytes, false, nullptr);
  std::string line = bar.render(50000000, 10.0);  // half of 100 MB in 10 s: 5 MB/s, 10 s to go
  EXPECT_NE(line.find("tokenize"), std::string::npos) << line;
  EXPECT_NE(line.find("50.0%"), std::string::npos) << line;
  EXPECT_NE(line.find("50.0/100.0 MB"), std::string::npos) << line;
  EXPECT_NE(line.find("5.0 MB/s"), std::string::npos) << line;
  EXPECT_NE(line.find("ETA 0:10"), std::string::npos) << line;
  gpt::ProgressBar steps("train", 0, gpt::ProgressBar::Unit::Count, false, nullptr, "steps");
  EXPECT_NE(steps.render(30, 2.0).find("15.00 steps/s"), std::string::npos) << steps.render(30, 2.0);
}

TEST(Progress, DurationFormat) {
  EXPECT_EQ(gpt::format_duration(3723), "1:02:03");
  EXPECT_EQ(gpt::format_duration(59.6), "1:00");
  EXPECT_EQ(gpt::format_duration(-1), "?");
  EXPECT_EQ(gpt::format_duration(INFINITY), "?");
}

TEST(Progress, ForcedBarDrawsToItsStreamAndEndsTheLine) {
  const std::string path = gpt::test::scratch_dir() + "/bar.txt";
  FILE* f = std::fopen(path.c_str(), "w+");
  ASSERT_NE(f, nullptr);
  {
    gpt::ProgressBar bar("x", 10, gpt::ProgressBar::Unit::Count, /*force=*/true, f);
    EXPECT_TRUE(bar.enabled());
    for (int i = 0; i <= 10; i++) bar.update(i);  // throttled: the first draw, then at most every 100 ms
    bar.finish();
  }
  std::fclose(f);
  std::string out = slurp(path);
  ASSERT_FALSE(out.empty());
  EXPECT_EQ(out.front(), '\r');
  EXPECT_EQ(out.back(), '\n');
  EXPECT_NE(out.find("100.0%"), std::string::npos) << out;
  FILE* plain = std::fopen(path.c_str(), "a");  // a regular file is not a terminal: no bar unless forced
  ASSERT_NE(plain, nullptr);
  {
    gpt::ProgressBar off("x", 10, gpt::ProgressBar::Unit::Count, false, plain);
    EXPECT_FALSE(off.enabled());
    off.update(5);
    off.finish();
  }
  std::fclose(plain);
  EXPECT_EQ(slurp(path), out);
}
