// A strict reader of one JSON object's members, for the project's own JSON files (hardware files, the
// CPU peak cache): every member must be asked for (an unknown one is an error: a typo must not silently
// leave a default in place), a member given twice is an error, and every number must be finite and in
// range. Errors are one line: "<file>: field <path>: <what was expected>".
#pragma once
#include <set>
#include <string>
#include <vector>

#include "src/io/json_min.h"

namespace gpt {

class JsonFields {
 public:
  // v must be an object; path names it in errors ("" for the top level, "profiles[2]" for a nested one).
  JsonFields(const JsonValue& v, std::string path, const std::string& file);
  const JsonValue* get(const std::string& key);   // the member, or null when absent
  const JsonValue& need(const std::string& key);  // the member; absent is an error
  // Numbers in [lo, hi]: num() gives def when the member is absent.
  double num(const std::string& key, double def, double lo, double hi);
  double need_num(const std::string& key, double lo, double hi);
  int64_t need_int(const std::string& key, int64_t lo, int64_t hi);  // an integer literal, read exactly
  std::string text(const std::string& key, const std::string& def);  // a string member
  std::string need_text(const std::string& key);
  bool boolean(const std::string& key, bool def);
  std::vector<std::string> strings(const std::string& key);  // an array of strings; absent: empty
  void finish() const;  // every member must have been asked for

  double number(const JsonValue& v, const std::string& path, double lo, double hi) const;
  std::string field(const std::string& key) const { return path_.empty() ? key : path_ + "." + key; }
  std::string where() const { return path_.empty() ? std::string("(top level)") : path_; }
  const std::string& file() const { return file_; }

 private:
  const JsonValue& v_;
  std::string path_;
  const std::string& file_;
  std::set<std::string> seen_;
};

}  // namespace gpt
