// The byte tokenizer: ids 0..255 are the raw bytes, 256 is <|endoftext|>. No vocabulary file, any byte
// string round-trips; useful for tiny models and tests that must not depend on GPT-2's files.
#include <memory>

#include "src/core/check.h"
#include "src/io/tokenizer.h"

namespace gpt {
namespace {

constexpr int kByteEot = 256;
constexpr std::string_view kEotText = "<|endoftext|>";

class ByteTokenizer : public Tokenizer {
 public:
  std::string name() const override { return "byte"; }
  int vocab_size() const override { return 257; }
  int eot_token() const override { return kByteEot; }

  std::vector<int> encode(std::string_view text, bool allow_special) const override {
    std::vector<int> out;
    out.reserve(text.size());
    size_t pos = 0;
    auto bytes = [&](std::string_view s) {
      for (unsigned char c : s) out.push_back(c);
    };
    if (allow_special) {
      for (size_t f; (f = text.find(kEotText, pos)) != std::string_view::npos; pos = f + kEotText.size()) {
        bytes(text.substr(pos, f - pos));
        out.push_back(kByteEot);
      }
    }
    bytes(text.substr(pos));
    return out;
  }

  std::string decode_token(int id) const override {
    GPT_CHECK(id >= 0 && id <= kByteEot, "byte tokenizer: token id ", id, " is out of range [0, 257)");
    return id == kByteEot ? std::string(kEotText) : std::string(1, static_cast<char>(id));
  }
};

}  // namespace

std::unique_ptr<Tokenizer> make_byte_tokenizer() { return std::make_unique<ByteTokenizer>(); }

}  // namespace gpt
