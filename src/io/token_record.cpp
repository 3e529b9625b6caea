// See token_record.h. The reader is strict: the record decides the shape of a model, so a damaged or
// hand-edited one must stop the command with a line naming the file, never be half-believed.
#include "src/io/token_record.h"

#include <filesystem>
#include <set>
#include <vector>

#include "src/core/check.h"
#include "src/io/atomic_file.h"
#include "src/io/json_fields.h"
#include "src/io/json_min.h"
#include "src/io/tokenizer.h"

namespace gpt {

namespace fs = std::filesystem;

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
  JsonFields f(v, "", path);  // every member required, none other, none twice
  const std::string format = f.need_text("format");
  GPT_CHECK(format == kTokenRecordFormat, path, ": field format: expected \"", kTokenRecordFormat, "\", got ",
            json_quote(format));
  const int64_t version = f.need_int("version", 0, 1 << 30);
  GPT_CHECK(version == kTokenRecordVersion, path, ": version ", version, ", expected ", kTokenRecordVersion,
            " (written by another gpt; run gpt tokenize again)");
  TokenRecord r;
  r.path = path;
  r.tokenizer = f.need_text("tokenizer");
  TokenizerIds ids;
  GPT_CHECK(tokenizer_ids(r.tokenizer, &ids), path, ": unknown tokenizer ", json_quote(r.tokenizer),
            ", expected \"byte\" or \"gpt2\"");
  r.vocab_size = (int)f.need_int("vocab_size", 0, 1 << 30);
  GPT_CHECK(r.vocab_size == ids.vocab_size, path, ": vocab_size ", r.vocab_size, ", but the ", r.tokenizer,
            " tokenizer has ", ids.vocab_size, " ids");
  r.eot_token = (int)f.need_int("eot_token", 0, 1 << 30);
  GPT_CHECK(r.eot_token == ids.eot_token, path, ": eot_token ", r.eot_token, ", but the ", r.tokenizer,
            " tokenizer's end-of-text id is ", ids.eot_token);
  r.source_bytes = (uint64_t)f.need_int("source_bytes", 0, INT64_MAX);
  r.source_crc32 = (uint32_t)f.need_int("source_crc32", 0, UINT32_MAX);
  r.documents = (uint64_t)f.need_int("documents", 0, INT64_MAX);
  r.train_tokens = (uint64_t)f.need_int("train_tokens", 0, INT64_MAX);
  r.val_tokens = (uint64_t)f.need_int("val_tokens", 0, INT64_MAX);
  f.finish();
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
