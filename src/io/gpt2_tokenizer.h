// Private pieces of the GPT-2 tokenizer, exposed for tests: the pre-tokeniser (GPT-2's split pattern,
// written by hand), the vocabulary loaded and validated from encoder.json + vocab.bpe, and the BPE merge
// of one piece. The public entry point is make_tokenizer("gpt2", data_dir) in io/tokenizer.h.
#pragma once
#include <array>
#include <memory>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "src/io/tokenizer.h"

namespace gpt::gpt2 {

constexpr int kVocabSize = 50257;  // 256 bytes + 50000 merges + <|endoftext|>
constexpr int kNumMerges = 50000;
constexpr int kEotToken = 50256;
constexpr std::string_view kEotText = "<|endoftext|>";

// GPT-2's bytes_to_unicode(): the printable stand-in code point of each byte, as used in the keys of
// encoder.json and the symbols of vocab.bpe.
const std::array<uint32_t, 256>& byte_to_unicode();

// Splits text into pieces exactly like GPT-2's pattern
//   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
// (\s = Unicode White_Space, as in the `regex` module and tiktoken). A byte that does not start a valid
// UTF-8 sequence counts as one "other" character (the class of U+FFFD), so invalid input still splits
// deterministically and every byte lands in exactly one piece.
class PieceSplitter {
 public:
  explicit PieceSplitter(std::string_view text) : s_(text) {}
  // Sets *piece to the next piece; false at the end of the text.
  bool next(std::string_view* piece);

 private:
  enum Cls : uint8_t { kLetter, kNumber, kSpace, kOther, kEnd };
  Cls cls_at(size_t i, size_t* len) const;
  size_t contraction_len() const;  // length of 's 't 're 've 'm 'll 'd at i_, or 0

  std::string_view s_;
  size_t i_ = 0;
};

// A pair of adjacent token ids and what merging them gives.
struct Merge {
  int rank;  // merge priority from vocab.bpe (lower merges first); the 256 bytes have ranks 0..255
  int id;    // id of the merged token
};

struct Vocab {
  std::vector<std::string> token_bytes;                   // (V) raw bytes of each id
  std::unordered_map<std::string, int> mergeable;         // bytes -> id, all tokens but <|endoftext|>
  std::unordered_map<uint64_t, Merge> pairs;              // (left id << 32 | right id) -> merge
  std::array<int, 256> byte_id{};                         // id of each single byte
};

// Loads and validates the two GPT-2 files; throws gpt::Error naming the file and the problem.
Vocab load_vocab(const std::string& encoder_json_path, const std::string& vocab_bpe_path);

// Byte-pair merge of one piece, tiktoken's rule: repeatedly merge the adjacent pair whose concatenation
// has the lowest rank (leftmost on ties) until no adjacent pair forms a token. Appends the ids to *out.
void bpe_merge(const Vocab& vocab, std::string_view piece, std::vector<int>* out);

// The tokenizer over data_dir/gpt2/{encoder.json,vocab.bpe}; make_tokenizer("gpt2", ...) calls this.
std::unique_ptr<Tokenizer> make_gpt2_tokenizer(const std::string& data_dir);

}  // namespace gpt::gpt2
