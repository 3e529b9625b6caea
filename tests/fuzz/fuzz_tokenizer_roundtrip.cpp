// libFuzzer harness for the GPT-2 tokenizer on arbitrary bytes, with the real vocabulary (data/gpt2).
// Input: byte 0 bit 0 = allow_special, the rest is the text. Checked on every input:
//   - decode(encode(x)) == x and every id is in [0, 50257);
//   - a second encode (served from the piece cache) gives the same ids;
//   - the pre-tokeniser's pieces concatenate back to the text;
//   - the ids equal a naive reference BPE written here from tiktoken's rule (merge the adjacent pair whose
//     concatenation is the lowest-ranked token, leftmost on ties; a piece that is a token is used whole),
//     which cross-checks both of the tokenizer's merge paths (short-piece scan and long-piece heap).
// Encoding and decoding valid ids never fail, so unlike the file harnesses this one lets gpt::Error surface.
// The data directory comes from GPT_FUZZ_DATA_DIR, else from the source tree the harness was built from.
#include <climits>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "tests/fuzz/fuzz_util.h"
#include "src/io/gpt2_tokenizer.h"
#include "src/io/tokenizer.h"

#ifndef GPT_SOURCE_DIR
#define GPT_SOURCE_DIR "."
#endif

namespace {

constexpr size_t kMaxReferencePiece = 256;  // bytes; the naive merge is quadratic

std::string data_dir() {
  const char* e = std::getenv("GPT_FUZZ_DATA_DIR");
  return e && *e ? e : std::string(GPT_SOURCE_DIR) + "/data";
}

struct Fixture {
  std::unique_ptr<gpt::Tokenizer> tok;
  gpt::gpt2::Vocab vocab;     // for the reference merge
  std::vector<int> rank;      // (V) merge rank of each multi-byte token id, INT_MAX otherwise
};

const Fixture& fixture() {
  static const Fixture f = [] {
    Fixture x;
    const std::string dir = data_dir();
    try {
      x.tok = gpt::make_tokenizer("gpt2", dir);
      x.vocab = gpt::gpt2::load_vocab(dir + "/gpt2/encoder.json", dir + "/gpt2/vocab.bpe");
    } catch (const gpt::Error& e) {
      std::fprintf(stderr, "fuzz_tokenizer_roundtrip: cannot load the GPT-2 vocabulary (set GPT_FUZZ_DATA_DIR): %s\n",
                   e.what());
      std::exit(2);
    }
    x.rank.assign(gpt::gpt2::kVocabSize, INT_MAX);
    for (const auto& kv : x.vocab.pairs) x.rank[(size_t)kv.second.id] = kv.second.rank;
    return x;
  }();
  return f;
}

// tiktoken's merge of one piece, the slow obvious way.
void reference_piece(const Fixture& f, std::string_view piece, std::vector<int>* out) {
  auto whole = f.vocab.mergeable.find(std::string(piece));
  if (whole != f.vocab.mergeable.end()) {
    out->push_back(whole->second);
    return;
  }
  std::vector<std::string> parts;  // (n) current parts, bytes
  for (char c : piece) parts.emplace_back(1, c);
  while (parts.size() > 1) {
    size_t best = parts.size();
    int best_rank = INT_MAX;
    for (size_t i = 0; i + 1 < parts.size(); i++) {
      auto it = f.vocab.mergeable.find(parts[i] + parts[i + 1]);
      if (it != f.vocab.mergeable.end() && f.rank[(size_t)it->second] < best_rank) {
        best_rank = f.rank[(size_t)it->second];
        best = i;
      }
    }
    if (best == parts.size()) break;
    parts[best] += parts[best + 1];
    parts.erase(parts.begin() + (std::ptrdiff_t)best + 1);
  }
  for (const std::string& p : parts) out->push_back(f.vocab.mergeable.at(p));
}

// Reference ids of ordinary text; false when a piece is too long for the naive merge.
bool reference_ordinary(const Fixture& f, std::string_view text, std::vector<int>* out) {
  gpt::gpt2::PieceSplitter split(text);
  std::string_view piece;
  std::string joined;
  bool ok = true;
  while (split.next(&piece)) {
    FUZZ_REQUIRE(!piece.empty(), "the pre-tokeniser returned an empty piece");
    joined.append(piece);
    if (piece.size() > kMaxReferencePiece) ok = false;
    if (ok) reference_piece(f, piece, out);
  }
  FUZZ_REQUIRE(joined == text, "the pre-tokeniser's pieces do not concatenate to the text");
  return ok;
}

bool reference_encode(const Fixture& f, std::string_view text, bool special, std::vector<int>* out) {
  size_t pos = 0;
  bool ok = true;
  if (special) {
    for (size_t hit; (hit = text.find(gpt::gpt2::kEotText, pos)) != std::string_view::npos;
         pos = hit + gpt::gpt2::kEotText.size()) {
      ok = reference_ordinary(f, text.substr(pos, hit - pos), out) && ok;
      out->push_back(gpt::gpt2::kEotToken);
    }
  }
  return reference_ordinary(f, text.substr(pos), out) && ok;
}

}  // namespace

// Loads the vocabulary (seconds under ASan) before the first input, outside libFuzzer's per-input timeout.
extern "C" int LLVMFuzzerInitialize(int*, char***) {
  fixture();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const Fixture& f = fixture();
  const bool special = data[0] & 1;
  const std::string_view text(reinterpret_cast<const char*>(data) + 1, size - 1);

  const std::vector<int> ids = f.tok->encode(text, special);
  for (int id : ids) FUZZ_REQUIRE(id >= 0 && id < gpt::gpt2::kVocabSize, "encode produced id ", id);
  FUZZ_REQUIRE(f.tok->decode(ids) == text, "decode(encode(x)) != x (", text.size(), " bytes, allow_special=",
               special, ")");
  FUZZ_REQUIRE(f.tok->encode(text, special) == ids, "a second (cached) encode gave different ids");
  std::vector<int> want;
  if (reference_encode(f, text, special, &want))
    FUZZ_REQUIRE(ids == want, "ids differ from the reference BPE (", ids.size(), " vs ", want.size(), " ids)");
  return 0;
}
