// See json_fields.h.
#include "src/io/json_fields.h"

#include <cmath>
#include <cstdlib>

#include "src/core/check.h"

namespace gpt {

JsonFields::JsonFields(const JsonValue& v, std::string path, const std::string& file)
    : v_(v), path_(std::move(path)), file_(file) {
  GPT_CHECK(v.kind == JsonValue::Kind::object, file_, ": field ", where(), ": expected an object, got ", v.kind_name());
}

const JsonValue* JsonFields::get(const std::string& key) {
  seen_.insert(key);
  const JsonValue* found = nullptr;
  for (const auto& [k, val] : v_.members) {
    if (k != key) continue;
    GPT_CHECK(!found, file_, ": field ", field(key), ": given twice");
    found = &val;
  }
  return found;
}

const JsonValue& JsonFields::need(const std::string& key) {
  const JsonValue* v = get(key);
  GPT_CHECK(v, file_, ": field ", field(key), ": missing");
  return *v;
}

void JsonFields::finish() const {
  for (const auto& [k, val] : v_.members) GPT_CHECK(seen_.count(k), file_, ": field ", field(k), ": unknown field");
}

double JsonFields::num(const std::string& key, double def, double lo, double hi) {
  const JsonValue* v = get(key);
  return v ? number(*v, field(key), lo, hi) : def;
}

double JsonFields::need_num(const std::string& key, double lo, double hi) { return number(need(key), field(key), lo, hi); }

int64_t JsonFields::need_int(const std::string& key, int64_t lo, int64_t hi) {
  const JsonValue& v = need(key);
  uint64_t u = 0;
  GPT_CHECK(v.kind == JsonValue::Kind::number && v.as_u64(&u) && u <= (uint64_t)INT64_MAX, file_, ": field ",
            field(key), ": expected a non-negative integer, got ", v.kind == JsonValue::Kind::number ? v.text : v.kind_name());
  GPT_CHECK((int64_t)u >= lo && (int64_t)u <= hi, file_, ": field ", field(key), ": ", u, " is outside [", lo, ", ", hi, "]");
  return (int64_t)u;
}

std::string JsonFields::text(const std::string& key, const std::string& def) {
  const JsonValue* v = get(key);
  if (!v) return def;
  GPT_CHECK(v->kind == JsonValue::Kind::string, file_, ": field ", field(key), ": expected a string, got ", v->kind_name());
  return v->text;
}

std::string JsonFields::need_text(const std::string& key) {
  need(key);
  return text(key, "");
}

bool JsonFields::boolean(const std::string& key, bool def) {
  const JsonValue* v = get(key);
  if (!v) return def;
  GPT_CHECK(v->kind == JsonValue::Kind::boolean, file_, ": field ", field(key), ": expected true or false, got ",
            v->kind_name());
  return v->boolean;
}

std::vector<std::string> JsonFields::strings(const std::string& key) {
  std::vector<std::string> out;
  const JsonValue* v = get(key);
  if (!v) return out;
  GPT_CHECK(v->kind == JsonValue::Kind::array, file_, ": field ", field(key), ": expected an array of strings, got ",
            v->kind_name());
  for (size_t i = 0; i < v->items.size(); i++) {
    GPT_CHECK(v->items[i].kind == JsonValue::Kind::string, file_, ": field ", field(key), "[", i,
              "]: expected a string, got ", v->items[i].kind_name());
    out.push_back(v->items[i].text);
  }
  return out;
}

double JsonFields::number(const JsonValue& v, const std::string& path, double lo, double hi) const {
  GPT_CHECK(v.kind == JsonValue::Kind::number, file_, ": field ", path, ": expected a number, got ", v.kind_name());
  char* end = nullptr;
  const double x = std::strtod(v.text.c_str(), &end);
  GPT_CHECK(end && *end == '\0' && std::isfinite(x), file_, ": field ", path, ": not a finite number: ", v.text);
  GPT_CHECK(x >= lo && x <= hi, file_, ": field ", path, ": ", v.text, " is outside [", lo, ", ", hi, "]");
  return x;
}

}  // namespace gpt
