// Loads GPT-2's vocabulary: encoder.json (token string -> id) and vocab.bpe (the 50,000 merges in rank
// order), both written with GPT-2's byte-to-unicode stand-ins. Everything is validated the way tiktoken
// asserts it when it builds its gpt2 ranks: every token is a byte, a merge result or <|endoftext|>, every
// merge's two pieces and result are tokens, and there are exactly 50,257 ids. Then the pair table for BPE
// is built: for every token and every split of its bytes into two tokens, (left, right) -> token. That is
// tiktoken's merge rule ("the concatenation is a token"), not only the pairs listed in vocab.bpe.
#include <cstdio>

#include "src/core/check.h"
#include "src/io/atomic_file.h"
#include "src/io/gpt2_tokenizer.h"
#include "src/io/json_min.h"
#include "src/io/unicode_tables.h"

namespace gpt::gpt2 {

const std::array<uint32_t, 256>& byte_to_unicode() {
  static const std::array<uint32_t, 256> table = [] {
    std::array<uint32_t, 256> t{};
    uint32_t extra = 0;
    for (uint32_t b = 0; b < 256; ++b) {
      const bool printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
      t[b] = printable ? b : 256 + extra++;
    }
    return t;
  }();
  return table;
}

namespace {

// Rank order of the 256 byte tokens: the printable bytes first, then the rest (bytes_to_unicode order).
std::array<int, 256> byte_rank_order() {
  std::array<int, 256> order{};
  int k = 0;
  for (int pass = 0; pass < 2; ++pass)
    for (uint32_t b = 0; b < 256; ++b)
      if ((byte_to_unicode()[b] == b) == (pass == 0)) order[k++] = static_cast<int>(b);
  return order;
}

// Maps a stand-in string back to raw bytes; false if it holds a character outside the byte map.
bool unicode_to_bytes(std::string_view s, std::string* out, uint32_t* bad_cp) {
  static const std::array<int, 324> inverse = [] {
    std::array<int, 324> inv;
    inv.fill(-1);
    for (int b = 0; b < 256; ++b) inv[byte_to_unicode()[b]] = b;
    return inv;
  }();
  out->clear();
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  for (size_t i = 0; i < s.size();) {
    uint32_t cp = 0;
    const int n = unicode::decode_utf8(p + i, s.size() - i, &cp);
    if (n == 0 || cp >= inverse.size() || inverse[cp] < 0) {
      *bad_cp = n == 0 ? 0xFFFD : cp;
      return false;
    }
    out->push_back(static_cast<char>(inverse[cp]));
    i += static_cast<size_t>(n);
  }
  return true;
}

std::string hex_cp(uint32_t cp) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "U+%04X", static_cast<unsigned>(cp));
  return buf;
}

// encoder.json -> token_bytes (by id) and the bytes -> id map of mergeable tokens.
void load_encoder(const std::string& path, Vocab* v) {
  const auto entries = parse_json_int_object(read_file(path), path);
  GPT_CHECK(entries.size() == static_cast<size_t>(kVocabSize), path, ": expected ", kVocabSize,
            " tokens (GPT-2 vocabulary), found ", entries.size());
  v->token_bytes.assign(kVocabSize, std::string());
  std::vector<bool> seen(kVocabSize, false);
  std::string bytes;
  for (const auto& [key, id] : entries) {
    GPT_CHECK(id >= 0 && id < kVocabSize, path, ": token \"", key, "\" has id ", id, ", expected 0..",
              kVocabSize - 1);
    GPT_CHECK(!seen[id], path, ": id ", id, " is used twice (second time by \"", key, "\")");
    seen[id] = true;
    uint32_t bad = 0;
    GPT_CHECK(unicode_to_bytes(key, &bytes, &bad), path, ": token \"", key, "\" (id ", id, ") contains ",
              hex_cp(bad), ", which is not one of GPT-2's 256 byte symbols");
    GPT_CHECK(!bytes.empty(), path, ": empty token string (id ", id, ")");
    if (id == kEotToken) {
      GPT_CHECK(bytes == kEotText, path, ": id ", kEotToken, " must be ", kEotText, ", found \"", key, "\"");
      v->token_bytes[id] = bytes;
      continue;
    }
    GPT_CHECK(v->mergeable.emplace(bytes, id).second, path, ": token \"", key, "\" appears twice");
    v->token_bytes[id] = bytes;
  }
  for (int b = 0; b < 256; ++b) {
    auto it = v->mergeable.find(std::string(1, static_cast<char>(b)));
    GPT_CHECK(it != v->mergeable.end(), path, ": the single-byte token for byte ", b, " is missing");
    v->byte_id[b] = it->second;
  }
}

// vocab.bpe -> rank of each token id (bytes 0..255 in bytes_to_unicode order, merge k has 256 + k).
std::vector<int> load_merge_ranks(const std::string& path, const std::string& encoder_path, const Vocab& v) {
  const std::string text = read_file(path);
  std::vector<int> rank(kVocabSize, -1);
  const auto order = byte_rank_order();
  for (int k = 0; k < 256; ++k) rank[v.byte_id[order[k]]] = k;
  GPT_CHECK(text.rfind("#version", 0) == 0, path, ": line 1: expected the \"#version: ...\" header");
  size_t pos = text.find('\n');
  GPT_CHECK(pos != std::string::npos, path, ": no merges after the header line");
  int merges = 0, line_no = 1;
  std::string left, right;
  for (++pos; pos < text.size();) {
    ++line_no;
    size_t eol = text.find('\n', pos);
    if (eol == std::string::npos) eol = text.size();
    const std::string_view line(text.data() + pos, eol - pos);
    pos = eol + 1;
    const size_t sp = line.find(' ');
    GPT_CHECK(sp != std::string_view::npos && sp > 0 && sp + 1 < line.size() &&
                  line.find(' ', sp + 1) == std::string_view::npos,
              path, ": line ", line_no, ": expected two symbols separated by one space, found \"", line,
              "\"");
    uint32_t bad = 0;
    GPT_CHECK(unicode_to_bytes(line.substr(0, sp), &left, &bad) &&
                  unicode_to_bytes(line.substr(sp + 1), &right, &bad),
              path, ": line ", line_no, ": ", hex_cp(bad), " is not one of GPT-2's 256 byte symbols");
    GPT_CHECK(v.mergeable.count(left) && v.mergeable.count(right), path, ": line ", line_no, ": merge \"",
              line, "\" uses a piece that is not a token of ", encoder_path);
    auto it = v.mergeable.find(left + right);
    GPT_CHECK(it != v.mergeable.end(), path, ": line ", line_no, ": the result of merge \"", line,
              "\" is not a token of ", encoder_path, " (missing merge rank)");
    GPT_CHECK(rank[it->second] < 0, path, ": line ", line_no, ": merge \"", line,
              "\" produces a token that already has a rank");
    GPT_CHECK(merges < kNumMerges, path, ": more than ", kNumMerges, " merges (line ", line_no, ")");
    rank[it->second] = 256 + merges++;
  }
  GPT_CHECK(merges == kNumMerges, path, ": expected ", kNumMerges, " merges, found ", merges,
            " (truncated file?)");
  return rank;
}

}  // namespace

Vocab load_vocab(const std::string& encoder_json_path, const std::string& vocab_bpe_path) {
  Vocab v;
  load_encoder(encoder_json_path, &v);
  const std::vector<int> rank = load_merge_ranks(vocab_bpe_path, encoder_json_path, v);
  // 256 byte ranks + 50000 distinct merge results cover all 50256 mergeable ids.
  for (const auto& [bytes, id] : v.mergeable) {
    if (bytes.size() < 2) continue;
    for (size_t k = 1; k < bytes.size(); ++k) {
      auto l = v.mergeable.find(bytes.substr(0, k));
      if (l == v.mergeable.end()) continue;
      auto r = v.mergeable.find(bytes.substr(k));
      if (r == v.mergeable.end()) continue;
      const uint64_t key = (static_cast<uint64_t>(l->second) << 32) | static_cast<uint32_t>(r->second);
      v.pairs.emplace(key, Merge{rank[id], id});
    }
  }
  return v;
}

}  // namespace gpt::gpt2
