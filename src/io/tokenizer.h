// Tokenizers turn text into token ids and back. Two kinds: "byte" (ids 0..255 are raw bytes, 256 is the
// end-of-text marker) and "gpt2" (GPT-2's byte-level BPE, identical to tiktoken's gpt2 encoding, loaded
// from data/gpt2/encoder.json and vocab.bpe). Both decode any id sequence to bytes; decode(encode(x)) == x.
#pragma once
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace gpt {

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;
  virtual std::string name() const = 0;
  virtual int vocab_size() const = 0;  // number of ids (257 for byte, 50257 for gpt2)
  virtual int eot_token() const = 0;   // id of <|endoftext|>
  // Encodes text. With allow_special, the literal "<|endoftext|>" becomes eot_token(); otherwise it is
  // encoded as ordinary text.
  virtual std::vector<int> encode(std::string_view text, bool allow_special = false) const = 0;
  // Bytes of one id (may be a partial UTF-8 sequence); throws gpt::Error on an id out of range.
  virtual std::string decode_token(int id) const = 0;
  std::string decode(const std::vector<int>& ids) const;
};

// kind: "byte" or "gpt2". data_dir holds gpt2/encoder.json and gpt2/vocab.bpe (for "gpt2").
// Throws gpt::Error naming the file and the problem when files are missing or malformed.
std::unique_ptr<Tokenizer> make_tokenizer(const std::string& kind, const std::string& data_dir);

// The ids of a tokenizer kind, known without loading its files (what a data set's record is checked
// against, io/token_record.h): byte {257, 256}, gpt2 {50257, 50256}. False for any other kind.
struct TokenizerIds {
  int vocab_size = 0;
  int eot_token = 0;
};
bool tokenizer_ids(const std::string& kind, TokenizerIds* out);

}  // namespace gpt
