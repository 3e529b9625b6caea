// GPT-2's pre-tokeniser without a regex engine. The pattern's alternatives are tried in order at each
// position, as a backtracking regex would:
//   1. 's 't 're 've 'm 'll 'd      (lower-case ASCII only: "'S" is not a contraction)
//   2-4. an optional single U+0020 followed by a maximal run of letters, or numbers, or "other"
//      characters (neither \s nor \p{L} nor \p{N})
//   5. \s+(?!\S): a whitespace run that ends the text is taken whole; before a non-space character the
//      greedy run backs off by one character, leaving the last space to prefix the next word
//   6. \s+: a single whitespace character before a non-space character (e.g. "\tfoo").
#include "src/io/gpt2_tokenizer.h"
#include "src/io/unicode_tables.h"

namespace gpt::gpt2 {
namespace {

// Class of each ASCII byte, so the common case needs no table search.
struct AsciiClasses {
  uint8_t cls[128];
  AsciiClasses() {
    for (uint32_t c = 0; c < 128; ++c) cls[c] = static_cast<uint8_t>(unicode::char_class(c));
  }
};
const AsciiClasses kAscii;

}  // namespace

PieceSplitter::Cls PieceSplitter::cls_at(size_t i, size_t* len) const {
  if (i >= s_.size()) {
    *len = 0;
    return kEnd;
  }
  const auto* p = reinterpret_cast<const unsigned char*>(s_.data()) + i;
  if (*p < 0x80) {
    *len = 1;
    return static_cast<Cls>(kAscii.cls[*p]);
  }
  uint32_t cp;
  const int n = unicode::decode_utf8(p, s_.size() - i, &cp);
  if (n == 0) {  // invalid UTF-8 byte: one "other" character
    *len = 1;
    return kOther;
  }
  *len = static_cast<size_t>(n);
  switch (unicode::char_class(cp)) {
    case unicode::CharClass::kLetter: return kLetter;
    case unicode::CharClass::kNumber: return kNumber;
    case unicode::CharClass::kSpace: return kSpace;
    default: return kOther;
  }
}

size_t PieceSplitter::contraction_len() const {
  const size_t rest = s_.size() - i_;
  if (rest < 2 || s_[i_] != '\'') return 0;
  const char a = s_[i_ + 1];
  if (a == 's' || a == 't' || a == 'm' || a == 'd') return 2;
  if (rest >= 3) {
    const char b = s_[i_ + 2];
    if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return 3;
  }
  return 0;
}

bool PieceSplitter::next(std::string_view* piece) {
  if (i_ >= s_.size()) return false;
  const size_t start = i_;
  if (size_t n = contraction_len()) {
    i_ += n;
    *piece = s_.substr(start, n);
    return true;
  }
  size_t len0, len1;
  const Cls c0 = cls_at(i_, &len0);
  size_t j = i_;  // start of the run of one class
  Cls run = kEnd;
  if (s_[i_] == ' ') {
    const Cls c1 = cls_at(i_ + 1, &len1);
    if (c1 == kLetter || c1 == kNumber || c1 == kOther) {
      run = c1;
      j = i_ + 1;
    }
  } else if (c0 != kSpace) {
    run = c0;
  }
  if (run != kEnd) {  // alternatives 2-4
    size_t len;
    while (cls_at(j, &len) == run) j += len;
    i_ = j;
    *piece = s_.substr(start, j - start);
    return true;
  }
  // Alternatives 5-6: c0 is whitespace. Find the run's end and the start of its last character.
  size_t last = j, len;
  while (cls_at(j, &len) == kSpace) {
    last = j;
    j += len;
  }
  const size_t end = (j < s_.size() && last > start) ? last : j;
  i_ = end;
  *piece = s_.substr(start, end - start);
  return true;
}

}  // namespace gpt::gpt2
