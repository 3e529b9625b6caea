// The shared part of the tokenizers: decoding a sequence, and choosing a tokenizer by name.
#include "src/io/tokenizer.h"

#include "src/core/check.h"
#include "src/io/gpt2_tokenizer.h"

namespace gpt {

std::unique_ptr<Tokenizer> make_byte_tokenizer();  // byte_tokenizer.cpp

std::string Tokenizer::decode(const std::vector<int>& ids) const {
  std::string out;
  out.reserve(ids.size() * 4);
  for (int id : ids) out += decode_token(id);
  return out;
}

std::unique_ptr<Tokenizer> make_tokenizer(const std::string& kind, const std::string& data_dir) {
  if (kind == "byte") return make_byte_tokenizer();
  if (kind == "gpt2") return gpt2::make_gpt2_tokenizer(data_dir);
  fail("--tokenizer: unknown tokenizer \"", kind, "\", expected byte or gpt2");
}

bool tokenizer_ids(const std::string& kind, TokenizerIds* out) {
  if (kind == "byte") *out = {257, 256};
  else if (kind == "gpt2") *out = {50257, 50256};
  else return false;
  return true;
}

}  // namespace gpt
