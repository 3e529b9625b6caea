// Tests for the byte and GPT-2 tokenizers. The GPT-2 golden ids and pieces come from
// tests/io/tokenizer_cases.tsv, written by scripts/gen_tokenizer_cases.mjs with js-tiktoken (an
// independent implementation); "Hello world" and the Tiny Shakespeare count come from data/README.
// Bad-input tests write altered copies of the real vocabulary files into a scratch directory.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <thread>

#include "tests/common/json_lite.h"
#include "tests/common/test_paths.h"
#include "src/core/check.h"
#include "src/io/atomic_file.h"
#include "src/io/gpt2_tokenizer.h"
#include "src/io/json_min.h"
#include "src/io/tokenizer.h"
#include "src/io/unicode_tables.h"

namespace gpt {
namespace {

std::string data_dir() { return test::source_dir() + "/data"; }

const Tokenizer& gpt2_tok() {
  static const std::unique_ptr<Tokenizer> tok = make_tokenizer("gpt2", data_dir());
  return *tok;
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::string cur;
  std::istringstream in(s);
  while (std::getline(in, cur, sep)) out.push_back(cur);
  if (!s.empty() && s.back() == sep) out.emplace_back();
  return out;
}

std::string unhex(const std::string& h) {
  if (h == "-") return "";
  std::string out;
  for (size_t i = 0; i + 1 < h.size(); i += 2) out += static_cast<char>(std::stoi(h.substr(i, 2), nullptr, 16));
  return out;
}

struct Case {
  std::string name;
  bool special = false;
  std::string text;
  std::vector<std::string> pieces;
  std::vector<int> ids;
};
struct FileCase {
  std::string path;
  size_t count = 0;
  uint64_t fnv = 0;
};

void load_table(std::vector<Case>* cases, std::vector<FileCase>* files) {
  std::ifstream in(test::source_dir() + "/tests/io/tokenizer_cases.tsv");
  ASSERT_TRUE(in.good()) << "cannot open tests/io/tokenizer_cases.tsv";
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    const auto f = split(line, '\t');
    if (f[0] == "file") {
      ASSERT_EQ(f.size(), 5u) << line;
      files->push_back({f[1], std::stoul(f[3]), std::stoull(f[4], nullptr, 16)});
      continue;
    }
    ASSERT_EQ(f[0], "case");
    ASSERT_EQ(f.size(), 6u) << line;
    Case c{f[1], f[2] == "1", unhex(f[3]), {}, {}};
    if (f[4] != "-")
      for (const auto& p : split(f[4], ',')) c.pieces.push_back(unhex(p));
    if (f[5] != "-")
      for (const auto& id : split(f[5], ' ')) c.ids.push_back(std::stoi(id));
    cases->push_back(std::move(c));
  }
}

std::vector<int> ids_of(std::initializer_list<int> l) { return std::vector<int>(l); }

// ---- GPT-2: golden values ---------------------------------------------------------------------------

TEST(Gpt2Tokenizer, HelloWorld) {
  EXPECT_EQ(gpt2_tok().encode("Hello world"), ids_of({15496, 995}));
  EXPECT_EQ(gpt2_tok().name(), "gpt2");
  EXPECT_EQ(gpt2_tok().vocab_size(), 50257);
  EXPECT_EQ(gpt2_tok().eot_token(), 50256);
}

TEST(Gpt2Tokenizer, CasesTableMatchesJsTiktoken) {
  std::vector<Case> cases;
  std::vector<FileCase> files;
  load_table(&cases, &files);
  ASSERT_GE(cases.size(), 40u);
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    EXPECT_EQ(gpt2_tok().encode(c.text, c.special), c.ids);
  }
}

TEST(Gpt2Tokenizer, PiecesMatchReferenceSplit) {
  std::vector<Case> cases;
  std::vector<FileCase> files;
  load_table(&cases, &files);
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    gpt2::PieceSplitter split(c.text);
    std::vector<std::string> got;
    std::string_view piece;
    while (split.next(&piece)) got.emplace_back(piece);
    EXPECT_EQ(got, c.pieces);
  }
}

TEST(Gpt2Tokenizer, RoundTripEveryCase) {
  std::vector<Case> cases;
  std::vector<FileCase> files;
  load_table(&cases, &files);
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    EXPECT_EQ(gpt2_tok().decode(gpt2_tok().encode(c.text, false)), c.text);
    EXPECT_EQ(gpt2_tok().decode(gpt2_tok().encode(c.text, true)), c.text);
  }
}

uint64_t fnv1a_ids(const std::vector<int>& ids) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (int id : ids) h = (h ^ static_cast<uint64_t>(id)) * 0x100000001b3ull;
  return h;
}

TEST(Gpt2Tokenizer, TinyShakespeare) {
  std::vector<Case> cases;
  std::vector<FileCase> files;
  load_table(&cases, &files);
  ASSERT_EQ(files.size(), 1u);
  const std::string text = read_file(test::source_dir() + "/" + files[0].path);
  const auto ids = gpt2_tok().encode(text);
  EXPECT_EQ(ids.size(), 338025u);  // data/README.md
  EXPECT_EQ(ids.size(), files[0].count);
  EXPECT_EQ(fnv1a_ids(ids), files[0].fnv) << "token ids differ from js-tiktoken's";
  EXPECT_EQ(gpt2_tok().decode(ids), text);
}

// ---- GPT-2: behaviour -------------------------------------------------------------------------------

TEST(Gpt2Tokenizer, SpecialTokenOnlyWhenAllowed) {
  const std::string text = "a<|endoftext|>b<|endoftext|><|endoftext|>";
  const auto plain = gpt2_tok().encode(text, false);
  const auto special = gpt2_tok().encode(text, true);
  EXPECT_EQ(std::count(plain.begin(), plain.end(), 50256), 0);
  EXPECT_EQ(std::count(special.begin(), special.end(), 50256), 3);
  EXPECT_EQ(gpt2_tok().decode(plain), text);
  EXPECT_EQ(gpt2_tok().decode(special), text);
  EXPECT_EQ(gpt2_tok().decode_token(50256), "<|endoftext|>");
}

TEST(Gpt2Tokenizer, DecodeTokenRange) {
  EXPECT_EQ(gpt2_tok().decode_token(15496), "Hello");
  EXPECT_EQ(gpt2_tok().decode_token(995), " world");
  EXPECT_THROW(gpt2_tok().decode_token(-1), Error);
  EXPECT_THROW(gpt2_tok().decode_token(50257), Error);
  EXPECT_THROW(gpt2_tok().decode({15496, 70000}), Error);
}

TEST(Gpt2Tokenizer, RandomBytesRoundTrip) {
  std::mt19937 rng(1234);
  const std::string alphabet[] = {"a", "Z", " ", "  ", "\n", "\t", "'s", "'", "7", "!", "\xc3\xa9",
                                  "\xe4\xb8\xad", "\xf0\x9f\x98\x80", "\xff", "\x80", "\xe2\x82",
                                  "\xed\xa0\x80", "\xc2\xa0", "\x00"};
  for (int iter = 0; iter < 300; ++iter) {
    std::string s;
    const int n = static_cast<int>(rng() % 200);
    for (int i = 0; i < n; ++i) {
      if (rng() % 4 == 0) s += static_cast<char>(rng() % 256);
      else s += alphabet[rng() % (sizeof alphabet / sizeof alphabet[0])];
    }
    const auto ids = gpt2_tok().encode(s);
    for (int id : ids) ASSERT_TRUE(id >= 0 && id < 50256) << id;
    ASSERT_EQ(gpt2_tok().decode(ids), s) << "iteration " << iter;
  }
}

TEST(Gpt2Tokenizer, CacheAndConcurrencyGiveSameIds) {
  const std::string text = read_file(data_dir() + "/tinyshakespeare/input.txt").substr(0, 200000);
  const auto fresh = make_tokenizer("gpt2", data_dir());
  const auto cold = fresh->encode(text);  // empty cache
  EXPECT_EQ(fresh->encode(text), cold);   // warm cache
  std::vector<int> a, b;
  std::thread t1([&] { a = fresh->encode(text); });
  std::thread t2([&] { b = fresh->encode(text); });
  t1.join();
  t2.join();
  EXPECT_EQ(a, cold);
  EXPECT_EQ(b, cold);
}

// ---- GPT-2 vocabulary files: every defect is one gpt::Error naming the file ---------------------------

struct VocabFiles {
  std::string encoder = read_file(test::source_dir() + "/data/gpt2/encoder.json");
  std::string merges = read_file(test::source_dir() + "/data/gpt2/vocab.bpe");
};
const VocabFiles& real_files() {
  static const VocabFiles f;
  return f;
}

// Writes <scratch>/gpt2/{encoder.json,vocab.bpe} (an empty string leaves the file out) and returns the
// error message of loading them.
std::string load_error(const std::string& encoder, const std::string& merges) {
  const std::string dir = test::scratch_dir();
  std::filesystem::create_directories(dir + "/gpt2");
  if (!encoder.empty()) std::ofstream(dir + "/gpt2/encoder.json", std::ios::binary) << encoder;
  if (!merges.empty()) std::ofstream(dir + "/gpt2/vocab.bpe", std::ios::binary) << merges;
  try {
    make_tokenizer("gpt2", dir);
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

std::string replace_once(std::string s, const std::string& from, const std::string& to) {
  const size_t at = s.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  if (at != std::string::npos) s.replace(at, from.size(), to);
  return s;
}

#define EXPECT_HAS(msg, part) EXPECT_NE((msg).find(part), std::string::npos) << (msg)

TEST(Gpt2TokenizerFiles, UnmodifiedCopiesLoad) {
  EXPECT_EQ(load_error(real_files().encoder, real_files().merges), "(no error)");
}

TEST(Gpt2TokenizerFiles, MissingFiles) {
  EXPECT_HAS(load_error("", real_files().merges), "encoder.json");
  const std::string msg = load_error(real_files().encoder, "");
  EXPECT_HAS(msg, "vocab.bpe");
  EXPECT_HAS(msg, "cannot open");
}

TEST(Gpt2TokenizerFiles, MalformedEncoderJson) {
  const std::string& enc = real_files().encoder;
  std::string msg = load_error(enc.substr(0, 1000), real_files().merges);
  EXPECT_HAS(msg, "encoder.json: byte 1000: unexpected end of input");
  msg = load_error(replace_once(enc, "\"<|endoftext|>\": 50256}", "\"<|endoftext|>\": 50256,}"),
                   real_files().merges);
  EXPECT_HAS(msg, "encoder.json: byte ");
  EXPECT_HAS(msg, "expected a string key");
  msg = load_error(replace_once(enc, "\"!\": 0,", "\"!\": 0.5,"), real_files().merges);
  EXPECT_HAS(msg, "encoder.json: byte 7: expected an integer value");
  msg = load_error(replace_once(enc, "\"\\u0120gazed\"", "\"\\ud800gazed\""), real_files().merges);
  EXPECT_HAS(msg, "low surrogate");
  msg = load_error(replace_once(enc, "\"!\": 0,", "\"\\u4e00\": 0,"), real_files().merges);
  EXPECT_HAS(msg, "U+4E00");
  EXPECT_HAS(msg, "byte symbols");
}

TEST(Gpt2TokenizerFiles, WrongVocabularyContents) {
  const std::string& enc = real_files().encoder;
  std::string msg = load_error(replace_once(enc, " \"\\u0120gazed\": 50255,", ""), real_files().merges);
  EXPECT_HAS(msg, "encoder.json: expected 50257 tokens (GPT-2 vocabulary), found 50256");
  msg = load_error(replace_once(enc, "\"\\u0120gazed\": 50255", "\"\\u0120gazed\": 50254"), real_files().merges);
  EXPECT_HAS(msg, "encoder.json: id 50254 is used twice");
  msg = load_error(replace_once(enc, "\"\\u0120gazed\": 50255", "\"\\u0120gazed\": 50257"), real_files().merges);
  EXPECT_HAS(msg, "has id 50257");
  msg = load_error(replace_once(enc, "\"<|endoftext|>\": 50256", "\"<|startoftext|>\": 50256"),
                   real_files().merges);
  EXPECT_HAS(msg, "encoder.json: id 50256 must be <|endoftext|>");
}

TEST(Gpt2TokenizerFiles, MalformedVocabBpe) {
  const std::string& bpe = real_files().merges;
  // Drop the last 10 merges: the count is checked.
  size_t cut = bpe.size() - 1;
  for (int k = 0; k < 10; ++k) cut = bpe.rfind('\n', cut - 1);
  std::string msg = load_error(real_files().encoder, bpe.substr(0, cut + 1));
  EXPECT_HAS(msg, "vocab.bpe: expected 50000 merges, found 49990");
  // Cut in the middle of a line.
  msg = load_error(real_files().encoder, bpe.substr(0, bpe.rfind('\n', bpe.size() - 2) + 3));
  EXPECT_HAS(msg, "vocab.bpe: line 50001: expected two symbols separated by one space");
  msg = load_error(real_files().encoder, bpe.substr(bpe.find('\n') + 1));
  EXPECT_HAS(msg, "vocab.bpe: line 1: expected the \"#version: ...\" header");
}

TEST(Gpt2TokenizerFiles, MergeNotInEncoder) {
  const std::string& bpe = real_files().merges;
  const std::string last = "\xc4\xa0g azed\n";  // "Ġg azed": merge 50000 -> "Ġgazed" (id 50255)
  ASSERT_EQ(bpe.substr(bpe.size() - last.size()), last);
  ASSERT_EQ(real_files().encoder.find("\"zqxzqx\""), std::string::npos);
  std::string msg = load_error(real_files().encoder, replace_once(bpe, last, "zqxzqx azed\n"));
  EXPECT_HAS(msg, "vocab.bpe: line 50001: merge \"zqxzqx azed\" uses a piece that is not a token of");
  // Both pieces are tokens but their concatenation is not: no token carries this merge's rank.
  ASSERT_EQ(real_files().encoder.find("\"\\u0120the\\u0120the\""), std::string::npos);
  msg = load_error(real_files().encoder, replace_once(bpe, last, "\xc4\xa0the \xc4\xa0the\n"));
  EXPECT_HAS(msg, "vocab.bpe: line 50001: the result of merge");
  EXPECT_HAS(msg, "missing merge rank");
}

// ---- the JSON reader and the Unicode tables ---------------------------------------------------------

std::string json_error(const std::string& json) {
  try {
    parse_json_int_object(json, "x.json");
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(TokenizerJson, ParsesEscapesAndSurrogatePairs) {
  const auto m = parse_json_int_object(
      " {\"a\\\"b\": 1, \"\\u00e9\": -2,\n\"\\ud83d\\ude00\":3, \"\\/\\\\\\n\": 0, \"\xc3\xa9\": 7, \"a\\\"b\": 9} ",
      "x.json");
  ASSERT_EQ(m.size(), 6u);
  EXPECT_EQ(m[0], std::make_pair(std::string("a\"b"), 1));
  EXPECT_EQ(m[1], std::make_pair(std::string("\xc3\xa9"), -2));
  EXPECT_EQ(m[2], std::make_pair(std::string("\xf0\x9f\x98\x80"), 3));  // U+1F600
  EXPECT_EQ(m[3], std::make_pair(std::string("/\\\n"), 0));
  EXPECT_EQ(m[4].first, "\xc3\xa9");
  EXPECT_EQ(m[5].second, 9);  // duplicates are the caller's business
  EXPECT_TRUE(parse_json_int_object("{}", "x.json").empty());
}

TEST(TokenizerJson, RejectsMalformedInput) {
  EXPECT_EQ(json_error("{\"a\": 1} x"), "x.json: byte 9: expected end of input after the closing '}'");
  EXPECT_EQ(json_error("[1]"), "x.json: byte 0: expected '{' at the start of the object");
  EXPECT_EQ(json_error("{\"a\" 1}"), "x.json: byte 5: expected ':' after the key");
  EXPECT_EQ(json_error("{\"a\": \"1\"}"), "x.json: byte 6: expected an integer value");
  EXPECT_EQ(json_error("{\"a\": 1e3}"), "x.json: byte 7: expected an integer value (no fraction or exponent)");
  EXPECT_EQ(json_error("{\"a\": 9999999999}"), "x.json: byte 6: expected an integer in 32-bit range");
  EXPECT_EQ(json_error("{\"a\": 1"), "x.json: byte 7: unexpected end of input, expected ',' or '}' after a value");
  EXPECT_EQ(json_error("{\"\\udc00\": 1}"), "x.json: byte 2: expected a high surrogate before a low one (lone low surrogate)");
  EXPECT_EQ(json_error("{\"\\ud800\\u0041\": 1}"), "x.json: byte 8: expected a low surrogate (\\uDC00..\\uDFFF) after a high one");
  EXPECT_EQ(json_error("{\"\\u12g4\": 1}"), "x.json: byte 6: expected 4 hex digits after \\u");
  EXPECT_EQ(json_error("{\"\\x\": 1}"), "x.json: byte 3: expected a valid escape (\\\" \\\\ \\/ \\b \\f \\n \\r \\t \\uXXXX)");
  EXPECT_EQ(json_error("{\"a\tb\": 1}"), "x.json: byte 3: expected no raw control character inside a string (use an escape)");
  EXPECT_EQ(json_error("{\"a\xff\": 1}"), "x.json: byte 3: expected valid UTF-8");
  EXPECT_EQ(json_error("{\"a\xed\xa0\x80\": 1}"), "x.json: byte 3: expected valid UTF-8");  // surrogate
  EXPECT_EQ(json_error("{\"a\xc0\xaf\": 1}"), "x.json: byte 3: expected valid UTF-8");      // overlong
}

// The writing side: every string the project quotes must read back as itself through the project's reader,
// and be valid JSON to the tests' own parser (tests/common/json_lite.h, written apart from it; it reads
// each escape as one character, so only the length can be compared there). Every byte below
// 0x80 is in the string (control characters, quote, backslash, slash), then UTF-8 and a CPU's name.
TEST(JsonQuote, EveryAsciiByteRoundTrips) {
  std::string s;
  for (int c = 1; c < 0x80; c++) s += (char)c;
  s += "\xc3\xa9 \xf0\x9f\x98\x80 Intel(R) Xeon(R) \"quoted\" C:\\path\t";
  const std::string q = json_quote(s);
  for (unsigned char c : q) EXPECT_GE(c, 0x20) << "a raw control character in " << q;
  EXPECT_EQ(parse_json(q, "quoted").text, s);
  EXPECT_EQ(test::parse_json("{\"k\": " + q + "}").at("k").str.size(), s.size());
  EXPECT_EQ(json_quote(""), "\"\"");
  EXPECT_EQ(json_quote("a\"b\\c\n"), "\"a\\\"b\\\\c\\u000a\"");
}

TEST(TokenizerUnicode, CharacterClasses) {
  using unicode::CharClass;
  EXPECT_STREQ(unicode::kUnicodeVersion, "14.0.0");
  // Letters: ASCII, Latin-1 (ª is Lo, µ is Ll), CJK, Hangul, titlecase ǅ, modifier ʰ.
  for (uint32_t cp : {0x41u, 0x7Au, 0xAAu, 0xB5u, 0x4E00u, 0xAC00u, 0x1C5u, 0x2B0u, 0x10400u})
    EXPECT_EQ(unicode::char_class(cp), CharClass::kLetter) << std::hex << cp;
  // Numbers: Nd, Nl (Roman numeral twelve), No (superscript two, one half).
  for (uint32_t cp : {0x30u, 0x39u, 0x661u, 0xFF11u, 0x216Bu, 0xB2u, 0xBDu})
    EXPECT_EQ(unicode::char_class(cp), CharClass::kNumber) << std::hex << cp;
  // White_Space, including NEL and the no-break spaces.
  for (uint32_t cp : {0x9u, 0xDu, 0x20u, 0x85u, 0xA0u, 0x1680u, 0x2000u, 0x200Au, 0x2028u, 0x202Fu, 0x3000u})
    EXPECT_EQ(unicode::char_class(cp), CharClass::kSpace) << std::hex << cp;
  // Not White_Space: information separators, BOM, zero-width space, Mongolian vowel separator; marks.
  for (uint32_t cp : {0x1Cu, 0x1Fu, 0xFEFFu, 0x200Bu, 0x180Eu, 0x301u, 0x200Du, 0x1F600u, 0x27u})
    EXPECT_EQ(unicode::char_class(cp), CharClass::kOther) << std::hex << cp;
}

TEST(TokenizerUnicode, TablesAreSortedAndDisjoint) {
  const std::pair<const unicode::CodeRange*, size_t> tables[] = {
      {unicode::kLetterRanges, unicode::kLetterRangesCount},
      {unicode::kNumberRanges, unicode::kNumberRangesCount},
      {unicode::kSpaceRanges, unicode::kSpaceRangesCount}};
  for (const auto& [r, n] : tables) {
    ASSERT_GT(n, 0u);
    for (size_t i = 0; i < n; ++i) {
      EXPECT_LE(r[i].lo, r[i].hi);
      EXPECT_LE(r[i].hi, 0x10FFFFu);
      if (i > 0) {
        EXPECT_GT(r[i].lo, r[i - 1].hi + 1) << "ranges must be merged";
      }
    }
  }
}

// ---- benchmark (run with --gtest_also_run_disabled_tests; prints, asserts nothing about speed) -------

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

TEST(Gpt2TokenizerBench, DISABLED_EncodeTinyShakespeare) {
  const std::string text = read_file(data_dir() + "/tinyshakespeare/input.txt");
  const double mb = static_cast<double>(text.size()) / 1e6;
  auto t = std::chrono::steady_clock::now();
  const auto tok = make_tokenizer("gpt2", data_dir());
  const double load_s = seconds_since(t);
  t = std::chrono::steady_clock::now();
  const auto cold = tok->encode(text);  // empty piece cache
  const double cold_s = seconds_since(t);
  double warm_s = 1e9;
  for (int rep = 0; rep < 5; ++rep) {
    t = std::chrono::steady_clock::now();
    const auto warm = tok->encode(text);
    warm_s = std::min(warm_s, seconds_since(t));
    ASSERT_EQ(warm, cold);
  }
  t = std::chrono::steady_clock::now();
  const std::string back = tok->decode(cold);
  const double decode_s = seconds_since(t);
  ASSERT_EQ(back, text);
  std::printf("load %.0f ms; encode %.2f MB -> %zu tokens: cold %.1f MB/s, warm %.1f MB/s; decode %.0f MB/s\n",
              1e3 * load_s, mb, cold.size(), mb / cold_s, mb / warm_s, mb / decode_s);
}

// ---- byte tokenizer and factory ---------------------------------------------------------------------

TEST(ByteTokenizer, IdsAreBytes) {
  const auto tok = make_tokenizer("byte", "/nonexistent");
  EXPECT_EQ(tok->name(), "byte");
  EXPECT_EQ(tok->vocab_size(), 257);
  EXPECT_EQ(tok->eot_token(), 256);
  std::string all;
  for (int b = 0; b < 256; ++b) all += static_cast<char>(b);
  const auto ids = tok->encode(all);
  ASSERT_EQ(ids.size(), 256u);
  for (int b = 0; b < 256; ++b) EXPECT_EQ(ids[b], b);
  EXPECT_EQ(tok->decode(ids), all);
}

TEST(ByteTokenizer, SpecialToken) {
  const auto tok = make_tokenizer("byte", "");
  EXPECT_EQ(tok->encode("a<|endoftext|>b", true), ids_of({97, 256, 98}));
  EXPECT_EQ(tok->encode("a<|endoftext|>b", false).size(), 15u);
  EXPECT_EQ(tok->decode({97, 256, 98}), "a<|endoftext|>b");
  EXPECT_THROW(tok->decode_token(257), Error);
  EXPECT_THROW(tok->decode_token(-1), Error);
}

TEST(MakeTokenizer, UnknownKind) {
  try {
    make_tokenizer("sentencepiece", data_dir());
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("sentencepiece"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace gpt
