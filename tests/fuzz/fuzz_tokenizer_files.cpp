// libFuzzer harness for the GPT-2 vocabulary reader: make_tokenizer("gpt2", dir) on dir/gpt2/encoder.json
// and dir/gpt2/vocab.bpe written from the input.
// The reader demands exactly 50,257 tokens and 50,000 merges, so a small raw input only reaches the JSON
// parser and the count checks. To reach the deep checks (byte symbols, duplicate ids and tokens, merge
// pieces and results, ranks) the harness also builds a synthetic but valid vocabulary — the 256 byte
// tokens, 50,000 two-byte merges (merge k joins bytes k/256 and k%256 into id 256+k) and <|endoftext|> —
// and lets the input supply its last few entries.
// Input: byte 0 = mode, byte 1 = held-out count, then two parts separated by kSeparator.
//   mode bit 0 = 0 ("raw"):    encoder.json, vocab.bpe as given.
//   mode bit 0 = 1 ("tail"):   d = 1 + byte1 % 16 merges are held out of the synthetic vocabulary; the
//     parts are appended to it: the encoder part continues the JSON object after the <|endoftext|> entry
//     (", \"ab\": 50255}"), the vocab part continues vocab.bpe after the first 50,000 - d merge lines.
// When the files are accepted, the tokenizer must round-trip: decode(encode(x)) == x for a fixed text
// plus the input's bytes, with and without special tokens, and every id must be in range.
#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "tests/fuzz/fuzz_util.h"
#include "src/io/gpt2_tokenizer.h"
#include "src/io/tokenizer.h"

namespace {

constexpr int kMaxHeldOut = 16;

void append_utf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else {  // the byte stand-ins are all below U+0800
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

// The stand-in text of a byte, as it appears in vocab.bpe, and JSON-escaped for encoder.json.
std::string symbol(int b) {
  std::string s;
  append_utf8(s, gpt::gpt2::byte_to_unicode()[(size_t)b]);
  return s;
}
std::string json_key(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

// The synthetic vocabulary as text, with the start offset of every entry so any tail can be cut off.
struct Synthetic {
  std::string encoder_entries;          // "\"key\": id, " for ids 0 .. 50255 in id order
  std::vector<size_t> encoder_offset;   // (50256 + 1) start of each entry, then the end
  std::string merge_lines;              // "a b\n" for merges 0 .. 49999
  std::vector<size_t> merge_offset;     // (50000 + 1)
};

const Synthetic& synthetic() {
  static const Synthetic s = [] {
    Synthetic v;
    for (int id = 0; id < gpt::gpt2::kEotToken; id++) {
      v.encoder_offset.push_back(v.encoder_entries.size());
      const std::string key = id < 256 ? symbol(id) : symbol((id - 256) / 256) + symbol((id - 256) % 256);
      v.encoder_entries += json_key(key) + ": " + std::to_string(id) + ", ";
    }
    v.encoder_offset.push_back(v.encoder_entries.size());
    for (int k = 0; k < gpt::gpt2::kNumMerges; k++) {
      v.merge_offset.push_back(v.merge_lines.size());
      v.merge_lines += symbol(k / 256) + " " + symbol(k % 256) + "\n";
    }
    v.merge_offset.push_back(v.merge_lines.size());
    return v;
  }();
  return s;
}

// encoder.json and vocab.bpe with the last d merges held out and the input's parts appended.
void tail_files(int d, std::string_view enc_tail, std::string_view bpe_tail, std::string* enc, std::string* bpe) {
  const Synthetic& s = synthetic();
  const size_t keep_ids = (size_t)(gpt::gpt2::kEotToken - d);
  *enc = "{" + s.encoder_entries.substr(0, s.encoder_offset[keep_ids]) + "\"<|endoftext|>\": 50256";
  enc->append(enc_tail);
  *bpe = "#version: 0.2\n" + s.merge_lines.substr(0, s.merge_offset[(size_t)(gpt::gpt2::kNumMerges - d)]);
  bpe->append(bpe_tail);
}

void check_round_trip(const gpt::Tokenizer& tok, std::string_view extra) {
  FUZZ_REQUIRE(tok.vocab_size() == gpt::gpt2::kVocabSize && tok.eot_token() == gpt::gpt2::kEotToken,
               "unexpected vocabulary size or end-of-text id");
  std::string text = "Hello world, it's 1234 <|endoftext|> \xc3\xbcnic\xc3\xb6" "de\t\n  x \xff\xfe";
  text.append(extra.substr(0, 256));
  for (bool special : {false, true}) {
    const std::vector<int> ids = tok.encode(text, special);
    for (int id : ids) FUZZ_REQUIRE(id >= 0 && id < tok.vocab_size(), "encode produced id ", id);
    FUZZ_REQUIRE(tok.decode(ids) == text, "decode(encode(x)) != x with allow_special=", special);
  }
}

}  // namespace

// Builds the synthetic vocabulary text before the first input, outside libFuzzer's per-input timeout.
extern "C" int LLVMFuzzerInitialize(int*, char***) {
  synthetic();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view in(reinterpret_cast<const char*>(data), size);
  const bool tail_mode = gpt::fuzz::byte_at(in, 0) & 1;
  const int held_out = 1 + gpt::fuzz::byte_at(in, 1) % kMaxHeldOut;
  const std::vector<std::string_view> parts = gpt::fuzz::split(in.substr(std::min<size_t>(size, 2)), 2);
  const std::string_view enc_part = parts[0], bpe_part = parts.size() > 1 ? parts[1] : std::string_view();

  static const std::string dir = [] {
    std::filesystem::create_directories(gpt::fuzz::scratch_dir() + "/gpt2");
    return gpt::fuzz::scratch_dir();
  }();
  if (tail_mode) {
    std::string enc, bpe;
    tail_files(held_out, enc_part, bpe_part, &enc, &bpe);
    gpt::fuzz::write_bytes(dir + "/gpt2/encoder.json", enc);
    gpt::fuzz::write_bytes(dir + "/gpt2/vocab.bpe", bpe);
  } else {
    gpt::fuzz::write_bytes(dir + "/gpt2/encoder.json", enc_part);
    gpt::fuzz::write_bytes(dir + "/gpt2/vocab.bpe", bpe_part);
  }
  gpt::fuzz::expect_ok_or_error([&] { check_round_trip(*gpt::make_tokenizer("gpt2", dir), in); });
  return 0;
}
