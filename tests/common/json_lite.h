// A strict little JSON parser for tests that must check files the program writes (traces, metrics):
// objects, arrays, strings (with escapes), numbers, true/false/null. Throws std::runtime_error with the
// byte offset on malformed input.
#pragma once
#include <cstdlib>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace gpt::test {

struct JValue {
  enum Type { Null, Bool, Num, Str, Arr, Obj } type = Null;
  double num = 0;
  bool b = false;
  std::string str;
  std::vector<JValue> arr;
  std::map<std::string, JValue> obj;
  const JValue& at(const std::string& k) const {
    auto it = obj.find(k);
    if (it == obj.end()) throw std::runtime_error("json: missing key " + k);
    return it->second;
  }
  bool has(const std::string& k) const { return obj.count(k) > 0; }
};

class JsonParser {
 public:
  explicit JsonParser(const std::string& s) : s_(s) {}
  JValue parse() {
    JValue v = value();
    ws();
    if (i_ != s_.size()) err("trailing characters");
    return v;
  }

 private:
  const std::string& s_;
  size_t i_ = 0;
  [[noreturn]] void err(const std::string& what) { throw std::runtime_error("json: " + what + " at byte " + std::to_string(i_)); }
  void ws() {
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\n' || s_[i_] == '\t' || s_[i_] == '\r')) i_++;
  }
  bool eat(char c) {
    ws();
    if (i_ < s_.size() && s_[i_] == c) return ++i_, true;
    return false;
  }
  void expect(char c) {
    if (!eat(c)) err(std::string("expected '") + c + "'");
  }
  std::string string() {
    expect('"');
    std::string out;
    while (i_ < s_.size() && s_[i_] != '"') {
      char c = s_[i_++];
      if ((unsigned char)c < 0x20) err("control character in string");
      if (c == '\\') {
        if (i_ >= s_.size()) err("bad escape");
        char e = s_[i_++];
        if (e == 'u') {
          if (i_ + 4 > s_.size()) err("bad \\u escape");
          i_ += 4;
          out += '?';
          continue;
        }
        if (std::string("\"\\/bfnrt").find(e) == std::string::npos) err("bad escape");
        out += e;
      } else {
        out += c;
      }
    }
    expect('"');
    return out;
  }
  JValue value() {
    ws();
    if (i_ >= s_.size()) err("unexpected end");
    JValue v;
    char c = s_[i_];
    if (c == '{') {
      v.type = JValue::Obj;
      i_++;
      if (eat('}')) return v;
      do {
        ws();
        std::string k = string();
        expect(':');
        v.obj[k] = value();
      } while (eat(','));
      expect('}');
    } else if (c == '[') {
      v.type = JValue::Arr;
      i_++;
      if (eat(']')) return v;
      do v.arr.push_back(value());
      while (eat(','));
      expect(']');
    } else if (c == '"') {
      v.type = JValue::Str;
      v.str = string();
    } else if (s_.compare(i_, 4, "true") == 0 || s_.compare(i_, 5, "false") == 0) {
      v.type = JValue::Bool;
      v.b = s_[i_] == 't';
      i_ += v.b ? 4 : 5;
    } else if (s_.compare(i_, 4, "null") == 0) {
      i_ += 4;
    } else {
      const char* start = s_.c_str() + i_;
      char* end = nullptr;
      v.type = JValue::Num;
      v.num = std::strtod(start, &end);
      if (end == start) err("bad value");
      i_ += end - start;
    }
    return v;
  }
};

inline JValue parse_json(const std::string& s) { return JsonParser(s).parse(); }

}  // namespace gpt::test
