// The tokenizer record beside the shards (src/io/token_record.h). What `gpt tokenize` writes is read back
// with the tests' own JSON parser and checked against values known independently of the program: the
// input's length, and CRC-32's published check value (CRC-32/IEEE of "123456789" is 0xCBF43926). A damaged
// record of every kind is refused with one line naming the file and what was expected; the id table the
// reader checks against is the tokenizers' own; records beside --train and --val must agree.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "src/core/check.h"
#include "src/io/prepare.h"
#include "src/io/token_record.h"
#include "src/io/tokenizer.h"
#include "tests/common/error_of.h"
#include "tests/common/json_lite.h"
#include "tests/common/test_paths.h"

namespace gpt::test {
namespace {

namespace fs = std::filesystem;

PrepareSummary tokenize(const std::string& input, const std::string& out, const std::string& tokenizer) {
  PrepareOptions o;
  o.input = input;
  o.out_dir = out;
  o.tokenizer = tokenizer;
  o.data_dir = source_dir() + "/data";
  o.val_fraction = 0;
  o.quiet = true;
  return prepare_dataset(o);
}

// A valid version-1 record, written by hand from the format in token_record.h.
std::string record_json(const std::string& tokenizer, int vocab, int eot) {
  return "{\"format\": \"gpt-tokenizer-record\", \"version\": 1, \"tokenizer\": \"" + tokenizer +
         "\", \"vocab_size\": " + std::to_string(vocab) + ", \"eot_token\": " + std::to_string(eot) +
         ", \"source_bytes\": 9, \"source_crc32\": 3421780262, \"documents\": 1, \"train_tokens\": 9, "
         "\"val_tokens\": 0}";
}

TEST(TokenRecord, TokenizeWritesTheInputsSizeAndCrc) {
  const std::string dir = scratch_dir();
  spit(dir + "/in.txt", "123456789");
  tokenize(dir + "/in.txt", dir + "/shards", "byte");
  const JValue j = parse_json(slurp(dir + "/shards/gpt_tokenizer.json"));
  EXPECT_EQ(j.at("format").str, "gpt-tokenizer-record");
  EXPECT_EQ(j.at("version").num, 1);
  EXPECT_EQ(j.at("tokenizer").str, "byte");
  EXPECT_EQ(j.at("vocab_size").num, 257);
  EXPECT_EQ(j.at("eot_token").num, 256);
  EXPECT_EQ(j.at("source_bytes").num, 9);
  EXPECT_EQ(j.at("source_crc32").num, (double)0xCBF43926u);
  EXPECT_EQ(j.at("documents").num, 1);
  EXPECT_EQ(j.at("train_tokens").num, 9);
  EXPECT_EQ(j.at("val_tokens").num, 0);
}

// A directory's documents are checksummed back to back in sorted order: "12345" + "6789" is "123456789".
TEST(TokenRecord, TheChecksumCoversEveryDocumentInOrder) {
  const std::string dir = scratch_dir();
  fs::create_directories(dir + "/docs");
  spit(dir + "/docs/b.txt", "6789");
  spit(dir + "/docs/a.txt", "12345");
  tokenize(dir + "/docs", dir + "/shards", "byte");
  const JValue j = parse_json(slurp(dir + "/shards/gpt_tokenizer.json"));
  EXPECT_EQ(j.at("source_bytes").num, 9);
  EXPECT_EQ(j.at("source_crc32").num, (double)0xCBF43926u);
  EXPECT_EQ(j.at("documents").num, 2);
  EXPECT_EQ(j.at("train_tokens").num, 10);  // 9 bytes and the EOT between the documents
}

// A second tokenize into the same directory with another tokenizer leaves that tokenizer's record.
TEST(TokenRecord, RetokenizingReplacesTheRecord) {
  const std::string dir = scratch_dir(), data = source_dir() + "/data";
  if (!fs::exists(data + "/gpt2/encoder.json")) GTEST_SKIP() << "no data/gpt2 vocabulary";
  spit(dir + "/in.txt", "Hello world, hello shards.\n");
  tokenize(dir + "/in.txt", dir + "/shards", "byte");
  EXPECT_EQ(read_token_record(dir + "/shards/gpt_tokenizer.json").tokenizer, "byte");
  tokenize(dir + "/in.txt", dir + "/shards", "gpt2");
  const TokenRecord r = read_token_record(dir + "/shards/gpt_tokenizer.json");
  EXPECT_EQ(r.tokenizer, "gpt2");
  EXPECT_EQ(r.vocab_size, 50257);
  EXPECT_EQ(r.eot_token, 50256);
}

// The earlier record goes before the new shards are written: a tokenize that fails part way leaves none
// describing shards it did not make.
TEST(TokenRecord, AFailedTokenizeLeavesNoStaleRecord) {
  const std::string dir = scratch_dir();
  fs::create_directories(dir + "/shards");
  spit(dir + "/shards/gpt_tokenizer.json", record_json("gpt2", 50257, 50256));
  spit(dir + "/in.txt", "123456789");
  PrepareOptions o;
  o.input = dir + "/in.txt";
  o.out_dir = dir + "/shards";
  o.tokenizer = "byte";
  o.val_fraction = 0.01;  // 0.09 of a token: refused after the text is read
  o.quiet = true;
  EXPECT_NE(error_of([&] { prepare_dataset(o); }).find("--val-fraction"), std::string::npos);
  EXPECT_FALSE(fs::exists(dir + "/shards/gpt_tokenizer.json"));
}

// The table the reader checks records against is what the tokenizers themselves say.
TEST(TokenRecord, TheIdTableIsTheTokenizers) {
  for (const char* kind : {"byte", "gpt2"}) {
    if (std::string(kind) == "gpt2" && !fs::exists(source_dir() + "/data/gpt2/encoder.json")) continue;
    TokenizerIds ids;
    ASSERT_TRUE(tokenizer_ids(kind, &ids)) << kind;
    const auto tok = make_tokenizer(kind, source_dir() + "/data");
    EXPECT_EQ(ids.vocab_size, tok->vocab_size()) << kind;
    EXPECT_EQ(ids.eot_token, tok->eot_token()) << kind;
  }
  TokenizerIds ids;
  EXPECT_FALSE(tokenizer_ids("none", &ids));
}

TEST(TokenRecord, AValidRecordIsRead) {
  const std::string dir = scratch_dir(), path = dir + "/gpt_tokenizer.json";
  spit(path, record_json("gpt2", 50257, 50256));
  const TokenRecord r = read_token_record(path);
  EXPECT_EQ(r.path, path);
  EXPECT_EQ(r.tokenizer, "gpt2");
  EXPECT_EQ(r.vocab_size, 50257);
  EXPECT_EQ(r.eot_token, 50256);
  EXPECT_EQ(r.source_bytes, 9u);
  EXPECT_EQ(r.source_crc32, 0xCBF43926u);
}

// Every kind of damage: one line, naming the file and what was expected.
TEST(TokenRecord, CorruptRecordsAreOneLineErrorsNamingTheFile) {
  const std::string dir = scratch_dir(), path = dir + "/gpt_tokenizer.json";
  const std::string good = record_json("byte", 257, 256);
  auto without = [&](const std::string& member) {  // good with one member (and its comma) cut out
    const size_t at = good.find("\"" + member + "\"");
    return good.substr(0, at) + good.substr(good.find(", ", at) + 2);
  };
  auto replaced = [&](const std::string& from, const std::string& to) {
    std::string s = good;
    s.replace(s.find(from), from.size(), to);
    return s;
  };
  const std::vector<std::pair<std::string, std::string>> cases = {
      {good.substr(0, good.size() - 1), "byte "},                       // truncated: the JSON reader's offset
      {"[1, 2]", "expected an object, got an array"},
      {"", "byte 0"},
      {without("vocab_size"), "field vocab_size: missing"},
      {without("eot_token"), "field eot_token: missing"},
      {without("tokenizer"), "field tokenizer: missing"},
      {replaced("\"byte\"", "\"bpe\""), "unknown tokenizer \"bpe\", expected \"byte\" or \"gpt2\""},
      {replaced("\"byte\"", "\"by\\nte\""), "unknown tokenizer \"by\\u000ate\""},  // quoted: still one line
      {replaced("\"byte\"", "7"), "field tokenizer: expected a string, got a number"},
      {replaced("257", "50257"), "vocab_size 50257, but the byte tokenizer has 257 ids"},
      {replaced("256", "0"), "eot_token 0, but the byte tokenizer's end-of-text id is 256"},
      {replaced("257", "-1"), "field vocab_size: expected a non-negative integer, got -1"},
      {replaced("257", "257.0"), "field vocab_size: expected a non-negative integer, got 257.0"},
      {replaced("257", "\"257\""), "field vocab_size: expected a non-negative integer, got a string"},
      {replaced("\"version\": 1", "\"version\": 2"), "version 2, expected 1"},
      {replaced("gpt-tokenizer-record", "meta"), "field format: expected \"gpt-tokenizer-record\", got \"meta\""},
      {replaced("\"documents\"", "\"docs\""), "field documents: missing"},
      {replaced("\"documents\": 1", "\"documents\": 1, \"docs\": 2"), "field docs: unknown field"},
      {replaced("\"documents\": 1", "\"documents\": 1, \"documents\": 1"), "field documents: given twice"},
      {replaced("3421780262", "4294967296"), "field source_crc32: 4294967296 is outside [0, 4294967295]"},
  };
  for (const auto& [text, expected] : cases) {
    spit(path, text);
    const std::string msg = error_of([&] { read_token_record(path); });
    EXPECT_EQ(msg.rfind(path, 0), 0u) << "names the file first: " << msg;
    EXPECT_NE(msg.find(expected), std::string::npos) << "for " << text << "\n got: " << msg;
    EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
  }
  EXPECT_NE(error_of([&] { read_token_record(dir + "/absent.json"); }).find(dir + "/absent.json"), std::string::npos);
}

TEST(TokenRecord, FoundBesideTheShardsAPatternNames) {
  const std::string dir = scratch_dir();
  fs::create_directories(dir + "/a");
  fs::create_directories(dir + "/b");
  spit(dir + "/a/train_000000.bin", "x");
  spit(dir + "/b/train_000000.bin", "x");
  EXPECT_FALSE(find_token_record(dir + "/a/train_*.bin", "--train")) << "no record: none";
  EXPECT_FALSE(find_token_record(dir + "/none_*.bin", "--train")) << "no match: none (the loader reports it)";
  EXPECT_FALSE(find_token_record("", "--train"));
  spit(dir + "/a/gpt_tokenizer.json", record_json("byte", 257, 256));
  const auto r = find_token_record(dir + "/a/train_*.bin", "--train");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->tokenizer, "byte");
  EXPECT_EQ(r->path, dir + "/a/gpt_tokenizer.json");
  // a glob over two directories: the records there must agree
  spit(dir + "/b/gpt_tokenizer.json", record_json("byte", 257, 256));
  EXPECT_TRUE(find_token_record(dir + "/*/train_*.bin", "--train"));
  spit(dir + "/b/gpt_tokenizer.json", record_json("gpt2", 50257, 50256));
  const std::string msg = error_of([&] { find_token_record(dir + "/*/train_*.bin", "--train"); });
  EXPECT_NE(msg.find("--train"), std::string::npos) << msg;
  EXPECT_NE(msg.find(dir + "/a/gpt_tokenizer.json"), std::string::npos) << msg;
  EXPECT_NE(msg.find(dir + "/b/gpt_tokenizer.json"), std::string::npos) << msg;
}

TEST(TokenRecord, TrainAndValRecordsMustAgree) {
  const std::string dir = scratch_dir();
  for (const char* d : {"/byte", "/gpt2", "/plain"}) {
    fs::create_directories(dir + d);
    spit(dir + d + "/val_000000.bin", "x");
  }
  spit(dir + "/byte/gpt_tokenizer.json", record_json("byte", 257, 256));
  spit(dir + "/gpt2/gpt_tokenizer.json", record_json("gpt2", 50257, 50256));
  const std::string byte = dir + "/byte/val_*.bin", gpt2 = dir + "/gpt2/val_*.bin", plain = dir + "/plain/val_*.bin";
  EXPECT_EQ(data_token_record(byte, byte)->tokenizer, "byte");
  EXPECT_EQ(data_token_record(plain, gpt2)->tokenizer, "gpt2") << "--val's record when --train has none";
  EXPECT_EQ(data_token_record(byte, "")->tokenizer, "byte");
  EXPECT_FALSE(data_token_record(plain, plain));
  const std::string msg = error_of([&] { data_token_record(byte, gpt2); });
  EXPECT_NE(msg.find("--train and --val"), std::string::npos) << msg;
  EXPECT_NE(msg.find(dir + "/byte/gpt_tokenizer.json"), std::string::npos) << msg;
  EXPECT_NE(msg.find(dir + "/gpt2/gpt_tokenizer.json"), std::string::npos) << msg;
}

}  // namespace
}  // namespace gpt::test
