// Strict recursive-descent reader for a flat JSON object of integers and for any JSON value (see
// json_min.h). Hand-written because the project needs exactly this and nothing more; every failure names
// the byte offset. Nesting is bounded (kMaxDepth) so hostile input cannot exhaust the stack.
#include "src/io/json_min.h"

#include <cstdint>
#include <cstdio>
#include <string>

#include "src/core/check.h"
#include "src/io/unicode_tables.h"

namespace gpt {
namespace {

constexpr int kMaxDepth = 64;

class Reader {
 public:
  Reader(std::string_view s, const std::string& source) : s_(s), source_(source) {}

  std::vector<std::pair<std::string, int32_t>> object() {
    std::vector<std::pair<std::string, int32_t>> out;
    skip_ws();
    expect('{', "'{' at the start of the object");
    skip_ws();
    if (peek() == '}') {
      ++i_;
    } else {
      while (true) {
        skip_ws();
        if (peek() != '"') error("a string key");
        std::string key = string();
        skip_ws();
        expect(':', "':' after the key");
        skip_ws();
        out.emplace_back(std::move(key), integer());
        skip_ws();
        if (peek() == ',') {
          ++i_;
          continue;
        }
        expect('}', "',' or '}' after a value");
        break;
      }
    }
    skip_ws();
    if (i_ != s_.size()) error("end of input after the closing '}'");
    return out;
  }

  JsonValue document() {
    skip_ws();
    JsonValue v = value(0);
    skip_ws();
    if (i_ != s_.size()) error("end of input after the JSON value");
    return v;
  }

 private:
  // One value of any kind; i_ is at its first byte (whitespace skipped).
  JsonValue value(int depth) {
    JsonValue v;
    v.offset = i_;
    const int c = peek();
    if (c == '{' || c == '[') {
      if (depth >= kMaxDepth) error("at most 64 levels of nested arrays and objects");
      ++i_;
      skip_ws();
      const char close = c == '{' ? '}' : ']';
      v.kind = c == '{' ? JsonValue::Kind::object : JsonValue::Kind::array;
      if (peek() == close) {
        ++i_;
        return v;
      }
      while (true) {
        skip_ws();
        if (c == '{') {
          if (peek() != '"') error("a string key");
          std::string key = string();
          skip_ws();
          expect(':', "':' after the key");
          skip_ws();
          v.members.emplace_back(std::move(key), value(depth + 1));
        } else {
          v.items.push_back(value(depth + 1));
        }
        skip_ws();
        if (peek() == ',') {
          ++i_;
          continue;
        }
        expect(close, c == '{' ? "',' or '}' after a value" : "',' or ']' after a value");
        return v;
      }
    }
    if (c == '"') {
      v.kind = JsonValue::Kind::string;
      v.text = string();
      return v;
    }
    if (c == '-' || (c >= '0' && c <= '9')) {
      v.kind = JsonValue::Kind::number;
      v.text = number();
      return v;
    }
    for (const char* word : {"true", "false", "null"}) {
      const size_t n = std::char_traits<char>::length(word);
      if (s_.substr(i_, n) == word) {
        i_ += n;
        v.kind = word[0] == 'n' ? JsonValue::Kind::null : JsonValue::Kind::boolean;
        v.boolean = word[0] == 't';
        return v;
      }
    }
    error("a JSON value (object, array, string, number, true, false or null)");
  }

  // A number literal as JSON defines it: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
  std::string number() {
    const size_t start = i_;
    if (peek() == '-') ++i_;
    if (peek() == '0') {
      ++i_;
    } else {
      if (peek() < '1' || peek() > '9') error("a digit");
      while (peek() >= '0' && peek() <= '9') ++i_;
    }
    if (peek() == '.') {
      ++i_;
      if (peek() < '0' || peek() > '9') error("a digit after the decimal point");
      while (peek() >= '0' && peek() <= '9') ++i_;
    }
    if (peek() == 'e' || peek() == 'E') {
      ++i_;
      if (peek() == '+' || peek() == '-') ++i_;
      if (peek() < '0' || peek() > '9') error("a digit in the exponent");
      while (peek() >= '0' && peek() <= '9') ++i_;
    }
    return std::string(s_.substr(start, i_ - start));
  }

  [[noreturn]] void error(const char* expected) const {
    if (i_ >= s_.size()) fail(source_, ": byte ", i_, ": unexpected end of input, expected ", expected);
    fail(source_, ": byte ", i_, ": expected ", expected);
  }
  int peek() const { return i_ < s_.size() ? static_cast<unsigned char>(s_[i_]) : -1; }
  void expect(char c, const char* what) {
    if (peek() != static_cast<unsigned char>(c)) error(what);
    ++i_;
  }
  void skip_ws() {
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\t' || s_[i_] == '\n' || s_[i_] == '\r')) ++i_;
  }

  int32_t integer() {
    const size_t start = i_;
    bool neg = false;
    if (peek() == '-') {
      neg = true;
      ++i_;
    }
    if (peek() < '0' || peek() > '9') error("an integer value");
    int64_t v = 0;
    if (peek() == '0') {
      ++i_;
    } else {
      while (peek() >= '0' && peek() <= '9') {
        v = v * 10 + (peek() - '0');
        ++i_;
        if (v > (int64_t{1} << 31)) {
          i_ = start;
          error("an integer in 32-bit range");
        }
      }
    }
    if (peek() == '.' || peek() == 'e' || peek() == 'E') error("an integer value (no fraction or exponent)");
    if (!neg && v == (int64_t{1} << 31)) {
      i_ = start;
      error("an integer in 32-bit range");
    }
    return static_cast<int32_t>(neg ? -v : v);
  }

  uint32_t hex4() {
    uint32_t v = 0;
    for (int k = 0; k < 4; ++k) {
      const int c = peek();
      int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10
            : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
      if (d < 0) error("4 hex digits after \\u");
      v = v * 16 + static_cast<uint32_t>(d);
      ++i_;
    }
    return v;
  }

  static void append_utf8(std::string& out, uint32_t cp) {
    if (cp < 0x80) {
      out += static_cast<char>(cp);
    } else if (cp < 0x800) {
      out += static_cast<char>(0xC0 | (cp >> 6));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
      out += static_cast<char>(0xE0 | (cp >> 12));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
      out += static_cast<char>(0xF0 | (cp >> 18));
      out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    }
  }

  // \uXXXX, possibly the high half of a surrogate pair; i_ points after the 'u'.
  uint32_t unicode_escape() {
    const size_t start = i_ - 2;
    uint32_t cp = hex4();
    if (cp >= 0xDC00 && cp <= 0xDFFF) {
      i_ = start;
      error("a high surrogate before a low one (lone low surrogate)");
    }
    if (cp >= 0xD800 && cp <= 0xDBFF) {
      if (peek() != '\\' || i_ + 1 >= s_.size() || s_[i_ + 1] != 'u') error("\\u low surrogate after a high one");
      i_ += 2;
      const uint32_t lo = hex4();
      if (lo < 0xDC00 || lo > 0xDFFF) {
        i_ -= 6;
        error("a low surrogate (\\uDC00..\\uDFFF) after a high one");
      }
      cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
    }
    return cp;
  }

  std::string string() {
    ++i_;  // opening quote
    std::string out;
    while (true) {
      const int c = peek();
      if (c < 0) error("a closing '\"'");
      if (c == '"') {
        ++i_;
        return out;
      }
      if (c < 0x20) error("no raw control character inside a string (use an escape)");
      if (c == '\\') {
        ++i_;
        const int e = peek();
        ++i_;
        switch (e) {
          case '"': out += '"'; break;
          case '\\': out += '\\'; break;
          case '/': out += '/'; break;
          case 'b': out += '\b'; break;
          case 'f': out += '\f'; break;
          case 'n': out += '\n'; break;
          case 'r': out += '\r'; break;
          case 't': out += '\t'; break;
          case 'u': append_utf8(out, unicode_escape()); break;
          default: --i_; error("a valid escape (\\\" \\\\ \\/ \\b \\f \\n \\r \\t \\uXXXX)");
        }
        continue;
      }
      uint32_t cp;
      const int len = unicode::decode_utf8(reinterpret_cast<const unsigned char*>(s_.data()) + i_,
                                           s_.size() - i_, &cp);
      if (len == 0) error("valid UTF-8");
      out.append(s_.data() + i_, static_cast<size_t>(len));
      i_ += static_cast<size_t>(len);
    }
  }

  std::string_view s_;
  const std::string& source_;
  size_t i_ = 0;
};

}  // namespace

std::vector<std::pair<std::string, int32_t>> parse_json_int_object(std::string_view json,
                                                                   const std::string& source) {
  return Reader(json, source).object();
}

JsonValue parse_json(std::string_view json, const std::string& source) { return Reader(json, source).document(); }

const char* JsonValue::kind_name() const {
  switch (kind) {
    case Kind::null: return "null";
    case Kind::boolean: return "a boolean";
    case Kind::number: return "a number";
    case Kind::string: return "a string";
    case Kind::array: return "an array";
    case Kind::object: return "an object";
  }
  return "?";
}

bool JsonValue::as_u64(uint64_t* out) const {
  if (kind != Kind::number || text.empty() || text.size() > 20) return false;
  uint64_t v = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return false;  // a sign, fraction or exponent
    const uint64_t d = (uint64_t)(c - '0');
    if (v > (UINT64_MAX - d) / 10) return false;
    v = v * 10 + d;
  }
  *out = v;
  return true;
}

std::string json_quote(std::string_view s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    if (c < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
      continue;
    }
    if (c == '"' || c == '\\') out += '\\';
    out += (char)c;
  }
  return out + "\"";
}

}  // namespace gpt
