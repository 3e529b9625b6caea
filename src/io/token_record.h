// The tokenizer record: a small JSON file, gpt_tokenizer.json, that `gpt tokenize` writes beside the shards
// it makes, so that the data knows which tokenizer made its ids. llm.c's shard header does not say, and a
// byte-level data set read as GPT-2 tokens trains a 50257-word model that can only ever emit nonsense.
// Commands that read shards (train, eval, memplan, bench) take the tokenizer and vocabulary from it, and
// refuse flags that contradict it. Shards without a record (llm.c's own) are read as before.
//
// Format, version 1 (one JSON object; every member below, no others):
//   {"format": "gpt-tokenizer-record", "version": 1, "tokenizer": "byte" | "gpt2",
//    "vocab_size": 257 | 50257, "eot_token": 256 | 50256,
//    "source_bytes": N, "source_crc32": N,        // the input text: bytes and CRC-32 (IEEE) of all its
//                                                 // documents back to back, in the order tokenized
//    "documents": N, "train_tokens": N, "val_tokens": N}
#pragma once
#include <cstdint>
#include <optional>
#include <string>

namespace gpt {

inline constexpr const char* kTokenRecordFile = "gpt_tokenizer.json";
inline constexpr const char* kTokenRecordFormat = "gpt-tokenizer-record";
inline constexpr int kTokenRecordVersion = 1;

struct TokenRecord {
  std::string path;          // the file it was read from (empty for one about to be written)
  std::string tokenizer;     // "byte" | "gpt2"
  int vocab_size = 0;        // ids the tokenizer makes: every shard id is below this
  int eot_token = 0;         // id joining the documents
  uint64_t source_bytes = 0;
  uint32_t source_crc32 = 0;
  uint64_t documents = 0, train_tokens = 0, val_tokens = 0;

  // "byte (257 ids, gpt_tokenizer.json at PATH)": how messages name the record.
  std::string describe() const;
};

// <dir>/gpt_tokenizer.json.
std::string token_record_path(const std::string& dir);
// Writes <dir>/gpt_tokenizer.json atomically.
void write_token_record(const std::string& dir, const TokenRecord& r);
// Reads and validates a record: the JSON, every member's type, the version, a known tokenizer, and its
// vocabulary and end-of-text id. Throws gpt::Error "<path>: <what was expected>" otherwise.
TokenRecord read_token_record(const std::string& path);

// The record beside the shards a glob names: the gpt_tokenizer.json of each directory holding a match.
// None when no directory has one, or nothing matches (the data loader reports that). Records of two
// directories that disagree are an error naming `flag` and both files.
std::optional<TokenRecord> find_token_record(const std::string& pattern, const std::string& flag);
// The record of a run's data: --train's, or --val's, or none (either pattern may be empty). Two records
// that disagree are an error naming both files.
std::optional<TokenRecord> data_token_record(const std::string& train_pattern, const std::string& val_pattern);

}  // namespace gpt
