// See token_record.h. The reader is strict: the record decides the shape of a model, so a damaged or
// hand-edited one must stop the command with a line naming the file, never be half-believed.
#include "src/io/token_record.h"

#include <filesystem>
#include <map>
#include <set>
#include <vector>

#include "src/core/check.h"
#include "src/io/atomic_file.h"
#include "src/io/json_min.h"
#include "src/io/tokenizer.h"

namespace gpt {

namespace fs = std::filesystem;

namespace {

// The record's members in the order they are written; all are required.
const char* const kMembers[] = {"format",       "version",   "tokenizer",    "vocab_size", "eot_token",
                                "source_bytes", "source_crc32", "documents", "train_tokens", "val_tokens"};

// The members of the record's object by name: each exactly once, none other.
std::map<std::string, const JsonValue*> members_of(const JsonValue& v, const std::string& path) {
  GPT_CHECK(v.kind == JsonValue::Kind::object, path, ": expected a JSON object (a tokenizer record), got ",
            v.kind_name());
  const std::set<std::string> known(std::begin(kMembers), std::end(kMembers));
  std::map<std::string, const JsonValue*> m;
  for (const auto& [name, value] : v.members) {
    GPT_CHECK(known.count(name), path, ": unexpected member ", json_quote(name), " (a version ",
              kTokenRecordVersion, " tokenizer record has: format, version, tokenizer, vocab_size, eot_token, "
              "source_bytes, source_crc32, documents, train_tokens, val_tokens)");
    GPT_CHECK(m.emplace(name, &value).second, path, ": member ", json_quote(name), " is given twice");
  }
  for (const char* name : kMembers) GPT_CHECK(m.count(name), path, ": missing member \"", name, "\"");
  return m;
}

uint64_t uint_member(const std::map<std::string, const JsonValue*>& m, const char* name, uint64_t max,
                     const std::string& path) {
  const JsonValue& v = *m.at(name);
  uint64_t x = 0;
  GPT_CHECK(v.kind == JsonValue::Kind::number && v.as_u64(&x) && x <= max, path, ": \"", name,
            "\" must be an integer in [0, ", max, "], got ", v.kind == JsonValue::Kind::number ? v.text : v.kind_name());
  return x;
}

std::string string_member(const std::map<std::string, const JsonValue*>& m, const char* name,
                          const std::string& path) {
  const JsonValue& v = *m.at(name);
  GPT_CHECK(v.kind == JsonValue::Kind::string, path, ": \"", name, "\" must be a string, got ", v.kind_name());
  return v.text;
}

}  // namespace

std::string TokenRecord::describe() const {
  return str(tokenizer, " (", vocab_size, " ids, ", path.empty() ? std::string(kTokenRecordFile) : path, ")");
}

std::string token_record_path(const std::string& dir) { return (fs::path(dir) / kTokenRecordFile).string(); }

void write_token_record(const std::string& dir, const TokenRecord& r) {
  const std::string json =
      str("{\n  \"format\": ", json_quote(kTokenRecordFormat), ",\n  \"version\": ", kTokenRecordVersion,
          ",\n  \"tokenizer\": ", json_quote(r.tokenizer), ",\n  \"vocab_size\": ", r.vocab_size,
          ",\n  \"eot_token\": ", r.eot_token, ",\n  \"source_bytes\": ", r.source_bytes, ",\n  \"source_crc32\": ",
          r.source_crc32, ",\n  \"documents\": ", r.documents, ",\n  \"train_tokens\": ", r.train_tokens,
          ",\n  \"val_tokens\": ", r.val_tokens, "\n}\n");
  write_file_atomic(token_record_path(dir), json.data(), json.size());
}

TokenRecord read_token_record(const std::string& path) {
  const JsonValue v = parse_json(read_file(path), path);
  const auto m = members_of(v, path);
  const std::string format = string_member(m, "format", path);
  GPT_CHECK(format == kTokenRecordFormat, path, ": \"format\" must be \"", kTokenRecordFormat, "\", got ",
            json_quote(format));
  const uint64_t version = uint_member(m, "version", 1u << 30, path);
  GPT_CHECK(version == (uint64_t)kTokenRecordVersion, path, ": version ", version, ", expected ",
            kTokenRecordVersion, " (written by another gpt; run gpt tokenize again)");
  TokenRecord r;
  r.path = path;
  r.tokenizer = string_member(m, "tokenizer", path);
  TokenizerIds ids;
  GPT_CHECK(tokenizer_ids(r.tokenizer, &ids), path, ": unknown tokenizer ", json_quote(r.tokenizer),
            ", expected \"byte\" or \"gpt2\"");
  r.vocab_size = (int)uint_member(m, "vocab_size", 1u << 30, path);
  GPT_CHECK(r.vocab_size == ids.vocab_size, path, ": vocab_size ", r.vocab_size, ", but the ", r.tokenizer,
            " tokenizer has ", ids.vocab_size, " ids");
  r.eot_token = (int)uint_member(m, "eot_token", 1u << 30, path);
  GPT_CHECK(r.eot_token == ids.eot_token, path, ": eot_token ", r.eot_token, ", but the ", r.tokenizer,
            " tokenizer's end-of-text id is ", ids.eot_token);
  r.source_bytes = uint_member(m, "source_bytes", UINT64_MAX, path);
  r.source_crc32 = (uint32_t)uint_member(m, "source_crc32", UINT32_MAX, path);
  r.documents = uint_member(m, "documents", UINT64_MAX, path);
  r.train_tokens = uint_member(m, "train_tokens", UINT64_MAX, path);
  r.val_tokens = uint_member(m, "val_tokens", UINT64_MAX, path);
  return r;
}

std::optional<TokenRecord> find_token_record(const std::string& pattern, const std::string& flag) {
  if (pattern.empty()) return std::nullopt;
  std::set<std::string> dirs;
  // No match is no error here: the data loader reports a pattern that matches nothing.
  for (const auto& file : glob_matches(pattern, flag)) dirs.insert(fs::path(file).parent_path().string());
  std::optional<TokenRecord> found;
  for (const auto& dir : dirs) {
    const std::string path = token_record_path(dir.empty() ? "." : dir);
    std::error_code ec;
    if (!fs::exists(path, ec)) continue;
    TokenRecord r = read_token_record(path);
    GPT_CHECK(!found || found->tokenizer == r.tokenizer, flag, " '", pattern, "': the shards' tokenizer records ",
              "disagree: ", found->describe(), " and ", r.describe());
    if (!found) found = std::move(r);
  }
  return found;
}

std::optional<TokenRecord> data_token_record(const std::string& train_pattern, const std::string& val_pattern) {
  std::optional<TokenRecord> train = find_token_record(train_pattern, "--train");
  std::optional<TokenRecord> val = find_token_record(val_pattern, "--val");
  GPT_CHECK(!train || !val || train->tokenizer == val->tokenizer, "--train and --val were made by different ",
            "tokenizers: --train's record says ", train->describe(), ", --val's ", val->describe());
  return train ? train : val;
}

}  // namespace gpt
