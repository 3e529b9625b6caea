// The data knows its tokenizer: `gpt tokenize` leaves gpt_tokenizer.json beside its shards, and train,
// eval, memplan and bench take the tokenizer and vocabulary from it. Flags that contradict it, a damaged
// record, and --train / --val records that disagree are one-line errors naming the record; shards without
// a record are read as before. Model vocabularies are read from the llm.c header bytes here (V is int32
// number 3 of the 256-int header), not through the program's reader.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "tests/common/json_lite.h"
#include "tests/common/test_paths.h"

namespace gpt::test {
namespace {

namespace fs = std::filesystem;

const char* kShape = "--n-layer 1 --n-head 2 --d-model 32 --seq-len 32 -B 2 -T 32 ";

// V from an llm.c model file's header.
int model_vocab(const std::string& path) {
  const std::string b = slurp(path);
  if (b.size() < 1024) return -1;
  int32_t h[4];
  std::memcpy(h, b.data(), sizeof h);
  return h[0] == 20240326 ? h[3] : -1;
}

// The byte shards' val split copied to `dir`, without their record (as llm.c's own shards come).
std::string bare_copy(const std::string& dir) {
  fs::create_directories(dir);
  fs::copy_file(shakespeare_byte_dir() + "/val_000000.bin", dir + "/val_000000.bin");
  return dir + "/val_*.bin";
}

std::string record_json(const std::string& tokenizer, int vocab, int eot) {
  return "{\"format\": \"gpt-tokenizer-record\", \"version\": 1, \"tokenizer\": \"" + tokenizer +
         "\", \"vocab_size\": " + std::to_string(vocab) + ", \"eot_token\": " + std::to_string(eot) +
         ", \"source_bytes\": 1, \"source_crc32\": 0, \"documents\": 1, \"train_tokens\": 1, \"val_tokens\": 0}";
}

// The device peak (or any integer) memplan --json reports under `key`.
double memplan_number(const std::string& args, const std::string& key) {
  const CliResult r = run_gpt("memplan " + args + " --json");
  EXPECT_EQ(r.code, 0) << r.out;
  return r.code == 0 ? parse_json(r.out.substr(r.out.find('{'))).at(key).num : -1;
}

TEST(TokenRecordCli, TokenizeWritesTheRecord) {
  const JValue j = parse_json(slurp(shakespeare_byte_dir() + "/gpt_tokenizer.json"));
  EXPECT_EQ(j.at("tokenizer").str, "byte");
  EXPECT_EQ(j.at("vocab_size").num, 257);
  EXPECT_EQ(j.at("source_bytes").num, (double)fs::file_size(source_dir() + "/data/tinyshakespeare/input.txt"));
  EXPECT_EQ(j.at("source_crc32").num, 3747689809.0);  // Python's zlib.crc32 of data/tinyshakespeare/input.txt
}

// The reported case: byte shards, no --tokenizer. The model is the byte model, and its samples are bytes.
TEST(TokenRecordCli, TrainWithoutTokenizerOnByteShardsBuildsTheByteModel) {
  const std::string d = shakespeare_byte_dir(), out = scratch_dir() + "/run";
  const CliResult r = run_gpt(std::string("train ") + kShape + "--steps 1 --sample-tokens 4 --train '" + d +
                              "/train_*.bin' --val '" + d + "/val_*.bin' --val-batches 1 --out " + out);
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find(" V=257 "), std::string::npos) << r.out;
  EXPECT_EQ(model_vocab(out + "/model.bin"), 257);
  EXPECT_NE(r.out.find("---- sample at step 1 ----"), std::string::npos) << "the byte tokenizer decodes: " << r.out;
  // --tokenizer none (no samples) still takes the record's vocabulary
  EXPECT_EQ(memplan_number(std::string(kShape) + "--tokenizer none --train '" + d + "/train_*.bin'", "V"), 257);
}

// Without a record, today's defaults: a GPT-2 vocabulary, and no error.
TEST(TokenRecordCli, ShardsWithoutARecordKeepTodaysDefaults) {
  const std::string dir = scratch_dir(), bare = bare_copy(dir + "/bare"), out = dir + "/run";
  const CliResult r = run_gpt(std::string("train ") + kShape + "--steps 1 --sample-tokens 0 --train '" + bare +
                              "' --out " + out);
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find(" V=50257 "), std::string::npos) << r.out;
  EXPECT_EQ(model_vocab(out + "/model.bin"), 50257);
  EXPECT_EQ(memplan_number(std::string(kShape) + "--train '" + bare + "'", "V"), 50257);
  // and the record-less shards still refuse ids at or past a smaller model's vocabulary
  expect_gpt_error(std::string("train ") + kShape + "--vocab 100 --tokenizer none --train '" + bare + "'",
                   "val_000000.bin");
}

TEST(TokenRecordCli, FlagsThatContradictTheRecordAreErrors) {
  const std::string d = shakespeare_byte_dir(), rec = d + "/gpt_tokenizer.json";
  const std::string train = "--train '" + d + "/train_*.bin' --steps 1 ";
  expect_gpt_error(std::string("train ") + kShape + train + "--tokenizer gpt2", "--tokenizer gpt2: the data was tokenized with byte (257 ids, " + rec + ")");
  expect_gpt_error(std::string("train ") + kShape + train + "--vocab 50257", "--vocab 50257: the data was tokenized with byte (257 ids, " + rec + ")");
  expect_gpt_error(std::string("train ") + kShape + train + "--tokenizer none --vocab 300", "--vocab 300: the data was tokenized with byte");
  expect_gpt_error(std::string("memplan ") + kShape + "--train '" + d + "/train_*.bin' --vocab 50257", "--vocab 50257: the data was tokenized with byte (257 ids, " + rec + ")");
  expect_gpt_error(std::string("memplan ") + kShape + "--val '" + d + "/val_*.bin' --tokenizer gpt2", "--tokenizer gpt2: the data was tokenized with byte");
  expect_gpt_error(std::string("bench ") + kShape + train + "--vocab 50257", "--vocab 50257: the data was tokenized with byte");
  // stating what the record says is fine
  const CliResult r = run_gpt(std::string("train ") + kShape + train + "--tokenizer byte --vocab 257 --sample-tokens 0");
  EXPECT_EQ(r.code, 0) << r.out;
}

// memplan and bench size the model as train does: from the record.
TEST(TokenRecordCli, MemplanAndBenchTakeTheVocabularyFromTheRecord) {
  const std::string d = shakespeare_byte_dir(), train = " --train '" + d + "/train_*.bin'";
  EXPECT_EQ(memplan_number(kShape + train, "V"), 257);
  EXPECT_EQ(memplan_number(std::string(kShape) + "--val '" + d + "/val_*.bin'", "V"), 257);
  EXPECT_EQ(memplan_number(kShape, "V"), 50257) << "no data: the default";
  expect_gpt_error(std::string("memplan ") + kShape + "--train '" + d + "/none_*.bin'", "--train: no file matches");
  const CliResult b = run_gpt(std::string("bench ") + kShape + train + " --steps 1 --json --quiet");
  const CliResult b257 = run_gpt(std::string("bench ") + kShape + "--vocab 257 --steps 1 --json --quiet");
  ASSERT_EQ(b.code, 0) << b.out;
  ASSERT_EQ(b257.code, 0) << b257.out;
  const double params = parse_json(b.out.substr(b.out.rfind('{'))).at("params").num;
  EXPECT_EQ(params, parse_json(b257.out.substr(b257.out.rfind('{'))).at("params").num);
  EXPECT_EQ(parse_json(b.out.substr(b.out.rfind('{'))).at("peak_device_bytes").num,
            memplan_number(kShape + train, "device_peak_bytes"));
  // bench reads --train's shards (a pattern that matches nothing is the data loader's error)
  expect_gpt_error(std::string("bench ") + kShape + "--steps 1 --train '" + d + "/none_*.bin'",
                   "--train: data pattern: no file matches");
}

TEST(TokenRecordCli, CorruptRecordsAreOneLineErrorsNamingTheFile) {
  const std::string dir = scratch_dir(), bare = bare_copy(dir + "/data"), rec = dir + "/data/gpt_tokenizer.json";
  const std::string train = std::string("train ") + kShape + "--steps 1 --train '" + bare + "'";
  const std::pair<std::string, std::string> cases[] = {
      {"{\"format\": ", rec + ": byte "},
      {record_json("bytes", 257, 256), rec + ": unknown tokenizer \"bytes\", expected \"byte\" or \"gpt2\""},
      {record_json("byte", 256, 256), rec + ": vocab_size 256, but the byte tokenizer has 257 ids"},
      {record_json("byte", 257, 0), rec + ": eot_token 0, but the byte tokenizer's end-of-text id is 256"},
      {"{\"format\": \"gpt-tokenizer-record\", \"version\": 1}", rec + ": field tokenizer: missing"},
  };
  for (const auto& [text, expected] : cases) {
    spit(rec, text);
    expect_gpt_error(train, expected);
    expect_gpt_error("memplan " + std::string(kShape) + "--train '" + bare + "'", expected);
    expect_gpt_error("eval --model /nonexistent.bin --val '" + bare + "'", expected);
  }
}

TEST(TokenRecordCli, TrainAndValRecordsThatDisagreeAreAnError) {
  const std::string d = shakespeare_byte_dir(), dir = scratch_dir(), other = bare_copy(dir + "/gpt2");
  spit(dir + "/gpt2/gpt_tokenizer.json", record_json("gpt2", 50257, 50256));
  expect_gpt_error(std::string("train ") + kShape + "--steps 1 --train '" + d + "/train_*.bin' --val '" + other + "'",
                   "--train and --val were made by different tokenizers: --train's record says byte (257 ids, " + d +
                       "/gpt_tokenizer.json), --val's gpt2 (50257 ids, " + dir + "/gpt2/gpt_tokenizer.json)");
}

// A model of another vocabulary cannot read the shards: eval and --init-from say so, naming the record.
TEST(TokenRecordCli, ModelsOfAnotherVocabularyAreRefused) {
  const std::string d = shakespeare_byte_dir(), dir = scratch_dir(), out = dir + "/run";
  const std::string gpt2 = bare_copy(dir + "/gpt2");
  spit(dir + "/gpt2/gpt_tokenizer.json", record_json("gpt2", 50257, 50256));
  ASSERT_EQ(run_gpt(std::string("train ") + kShape + "--steps 1 --sample-tokens 0 --train '" + d + "/train_*.bin' --out " + out).code, 0);
  ASSERT_EQ(model_vocab(out + "/model.bin"), 257);
  expect_gpt_error("eval --model " + out + "/model.bin --val '" + gpt2 + "' -B 2 -T 32",
                   "--model " + out + "/model.bin: a vocabulary of 257 tokens, but the --val shards were tokenized with gpt2 (50257 ids, " +
                       dir + "/gpt2/gpt_tokenizer.json)");
  expect_gpt_error("train -B 2 -T 32 --steps 1 --init-from " + out + "/model.bin --train '" + gpt2 + "'",
                   "--init-from " + out + "/model.bin: the model's vocabulary is 257: the data was tokenized with gpt2");
  const CliResult e = run_gpt("eval --model " + out + "/model.bin --val '" + d + "/val_*.bin' -B 2 -T 32 --batches 1");
  EXPECT_EQ(e.code, 0) << e.out;
}

}  // namespace
}  // namespace gpt::test
