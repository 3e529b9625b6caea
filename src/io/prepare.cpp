// `gpt tokenize`: reads the documents, encodes them into one token stream (uint16, 2 bytes per token in
// memory), splits off the tail as val, and writes each split as llm.c shards. The split needs the total
// token count, so the stream is kept whole; at 2 bytes per token this is fine for corpora up to a few GB.
// Large documents are encoded in ~chunk_bytes pieces, cut only at a newline between two printable ASCII
// bytes: GPT-2's pre-tokenizer makes such a newline a piece of its own and no piece spans it, so the cut
// cannot change the tokens (the byte tokenizer is unaffected by any cut).
#include "src/io/prepare.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <regex>
#include <string_view>

#include "src/core/check.h"
#include "src/io/atomic_file.h"
#include "src/io/data_loader.h"
#include "src/io/token_record.h"
#include "src/io/tokenizer.h"
#include "src/util/progress.h"

namespace gpt {

namespace fs = std::filesystem;

namespace {

void validate(const PrepareOptions& o) {
  GPT_CHECK(!o.input.empty(), "--input: missing (a text file or a directory of .txt files)");
  GPT_CHECK(!o.out_dir.empty(), "--out: missing (the directory for the shards)");
  GPT_CHECK(o.tokenizer == "byte" || o.tokenizer == "gpt2", "--tokenizer: expected byte or gpt2, got '",
            o.tokenizer, "'");
  GPT_CHECK(std::isfinite(o.val_fraction) && o.val_fraction >= 0.0 && o.val_fraction < 1.0,
            "--val-fraction: expected a value in [0, 1), got ", o.val_fraction);
  GPT_CHECK(o.shard_size > 0 && o.shard_size <= std::numeric_limits<int32_t>::max(),
            "--shard-size: expected tokens per shard in [1, 2147483647], got ", o.shard_size);
  GPT_CHECK(o.chunk_bytes > 0, "tokenize: chunk size must be positive, got ", o.chunk_bytes);
}

// The documents: the input file itself, or the sorted *.txt files of the input directory.
std::vector<std::string> list_documents(const std::string& input) {
  std::error_code ec;
  GPT_CHECK(fs::exists(input, ec), "--input: ", input, " does not exist");
  if (!fs::is_directory(input, ec)) return {input};
  std::vector<std::string> docs;
  for (const auto& e : fs::directory_iterator(input, ec))
    if (e.is_regular_file() && e.path().extension() == ".txt") docs.push_back(e.path().string());
  GPT_CHECK(!ec, "--input: cannot list directory ", input, ": ", ec.message());
  GPT_CHECK(!docs.empty(), "--input: directory ", input, " has no .txt files");
  std::sort(docs.begin(), docs.end());
  return docs;
}

bool plain_ascii(char c) { return c > 0x20 && c < 0x7f; }

// End of the next piece starting at `from`: the first safe cut at or after from + target, or the end.
size_t next_cut(std::string_view text, size_t from, int64_t target) {
  if ((int64_t)(text.size() - from) <= target) return text.size();
  for (size_t i = text.find('\n', from + (size_t)target); i != std::string_view::npos; i = text.find('\n', i + 1))
    if (i >= 1 && i + 1 < text.size() && plain_ascii(text[i - 1]) && plain_ascii(text[i + 1])) return i + 1;
  return text.size();
}

void append_tokens(const std::vector<int>& ids, const Tokenizer& tok, const std::string& doc,
                   std::vector<uint16_t>& stream) {
  for (int id : ids) {
    GPT_CHECK(id >= 0 && id <= 65535 && id < tok.vocab_size(), doc, ": tokenizer ", tok.name(),
              " produced id ", id, ", outside [0, ", std::min(tok.vocab_size(), 65536), ")");
    stream.push_back((uint16_t)id);
  }
}

// Writes stream[begin, begin + count) as <dir>/<name>_NNNNNN.bin shards; returns the paths.
std::vector<std::string> write_split(const std::vector<uint16_t>& stream, int64_t begin, int64_t count,
                                     const std::string& dir, const std::string& name, int64_t shard_size) {
  std::vector<std::string> paths;
  for (int64_t k = 0, done = 0; done < count; k++) {
    const int64_t n = std::min(shard_size, count - done);
    char file[64];
    std::snprintf(file, sizeof file, "%s_%06lld.bin", name.c_str(), (long long)k);
    std::vector<int> ids(stream.begin() + begin + done, stream.begin() + begin + done + n);  // (n,)
    paths.push_back((fs::path(dir) / file).string());
    write_token_shard(paths.back(), ids);
    done += n;
  }
  return paths;
}

// Removes train_NNNNNN.bin / val_NNNNNN.bin files of an earlier run that this run did not rewrite, so a
// glob over the directory sees only the new data. Returns how many were removed.
int remove_stale_shards(const std::string& dir, const std::vector<std::string>& keep) {
  static const std::regex ours("(train|val)_[0-9]{6}\\.bin");
  int removed = 0;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string file = e.path().filename().string();
    if (!std::regex_match(file, ours)) continue;
    bool rewritten = false;
    for (const auto& k : keep) rewritten = rewritten || fs::path(k).filename() == file;
    if (rewritten) continue;
    if (fs::remove(e.path(), ec)) removed++;
  }
  return removed;
}

std::string files_phrase(const std::vector<std::string>& files) {
  if (files.empty()) return "no file";
  if (files.size() == 1) return "1 file (" + files[0] + ")";
  return str(files.size(), " files (", files.front(), " .. ", files.back(), ")");
}

void write_record(const Tokenizer& tok, const PrepareSummary& s, const std::string& dir) {
  TokenRecord r;
  r.tokenizer = tok.name();
  r.vocab_size = tok.vocab_size();
  r.eot_token = tok.eot_token();
  r.source_bytes = (uint64_t)s.bytes;
  r.source_crc32 = s.crc32;
  r.documents = (uint64_t)s.documents;
  r.train_tokens = (uint64_t)s.train_tokens;
  r.val_tokens = (uint64_t)s.val_tokens;
  write_token_record(dir, r);
}

}  // namespace

PrepareSummary prepare_dataset(const PrepareOptions& o) {
  validate(o);
  const auto t0 = std::chrono::steady_clock::now();
  PrepareSummary s;
  const std::vector<std::string> docs = list_documents(o.input);
  for (const auto& d : docs) s.bytes += (int64_t)fs::file_size(d);
  GPT_CHECK(s.bytes > 0, "--input: ", o.input, " is empty (no text to tokenize)");
  s.documents = (int64_t)docs.size();

  auto tok = make_tokenizer(o.tokenizer, o.data_dir);
  GPT_CHECK(tok->vocab_size() <= 65536, "--tokenizer: ", tok->name(), " has ", tok->vocab_size(),
            " ids, more than a uint16 token shard can hold (65536)");
  std::error_code ec;
  fs::create_directories(o.out_dir, ec);
  GPT_CHECK(fs::is_directory(o.out_dir), "--out: cannot create directory ", o.out_dir,
            ec ? ": " + ec.message() : std::string());
  s.record_file = token_record_path(o.out_dir);
  fs::remove(s.record_file, ec);  // until the new shards are all written, no record speaks for them
  GPT_CHECK(!ec, "--out: cannot remove the earlier tokenizer record ", s.record_file, ": ", ec.message());

  std::vector<uint16_t> stream;  // (ntok,) all documents joined by EOT
  ProgressBar bar("tokenize", s.bytes, ProgressBar::Unit::Bytes, o.force_progress);
  int64_t bytes_done = 0;
  for (size_t d = 0; d < docs.size(); d++) {
    if (d > 0) stream.push_back((uint16_t)tok->eot_token());
    const std::string text = read_file(docs[d]);
    s.crc32 = crc32_update(s.crc32, text.data(), text.size());
    for (size_t from = 0; from < text.size();) {
      const size_t to = next_cut(text, from, o.chunk_bytes);
      append_tokens(tok->encode(std::string_view(text).substr(from, to - from)), *tok, docs[d], stream);
      bytes_done += (int64_t)(to - from);
      bar.update(bytes_done);
      from = to;
    }
  }
  bar.finish();

  const int64_t n = (int64_t)stream.size();
  const int64_t n_val = (int64_t)std::llround((double)n * o.val_fraction);
  const int64_t n_train = n - n_val;
  GPT_CHECK(o.val_fraction == 0.0 || n_val > 0, "--val-fraction: ", o.val_fraction, " of ", n,
            " tokens rounds to no val token; use a larger input or --val-fraction 0");
  GPT_CHECK(n_train > 0, "--val-fraction: ", o.val_fraction, " of ", n, " tokens leaves no train token");

  s.train_tokens = n_train;
  s.val_tokens = n_val;
  s.train_files = write_split(stream, 0, n_train, o.out_dir, "train", o.shard_size);
  s.val_files = write_split(stream, n_train, n_val, o.out_dir, "val", o.shard_size);
  std::vector<std::string> keep = s.train_files;
  keep.insert(keep.end(), s.val_files.begin(), s.val_files.end());
  const int stale = remove_stale_shards(o.out_dir, keep);
  write_record(*tok, s, o.out_dir);

  if (!o.quiet) {
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::printf("tokenize: %s, %lld document%s, %.1f MB in %.1f s: train %lld tokens in %s; val %lld tokens in "
                "%s%s; tokenizer record %s\n",
                tok->name().c_str(), (long long)s.documents, s.documents == 1 ? "" : "s", s.bytes * 1e-6, secs,
                (long long)n_train,
                files_phrase(s.train_files).c_str(), (long long)n_val, files_phrase(s.val_files).c_str(),
                stale ? str("; removed ", stale, " stale shards").c_str() : "", s.record_file.c_str());
    std::fflush(stdout);
  }
  return s;
}

}  // namespace gpt
