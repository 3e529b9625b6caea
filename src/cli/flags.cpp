// See flags.h.
#include "src/cli/flags.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>

#include "src/core/check.h"

namespace gpt {

Flags::Flags(const std::string& command, int argc, char** argv, const std::set<std::string>& switches) : cmd_(command) {
  for (int i = 0; i < argc; i++) {
    std::string a = argv[i];
    if (a == "--help" || a == "-h") {
      help_ = true;
      continue;
    }
    GPT_CHECK(a.size() >= 2 && a[0] == '-', "gpt ", cmd_, ": unexpected argument '", a, "' (flags start with -)");
    GPT_CHECK(!vals_.count(a), "gpt ", cmd_, ": flag ", a, " given twice");
    if (switches.count(a)) {
      vals_[a] = "1";
      continue;
    }
    GPT_CHECK(i + 1 < argc, "gpt ", cmd_, ": flag ", a, " needs a value");
    vals_[a] = argv[++i];
  }
}

bool Flags::has(const std::string& name) const { return vals_.count(name) > 0; }

std::string Flags::str(const std::string& name, const std::string& def) {
  used_.insert(name);
  auto it = vals_.find(name);
  return it == vals_.end() ? def : it->second;
}

std::string Flags::required(const std::string& name) {
  GPT_CHECK(has(name), "gpt ", cmd_, ": ", name, " is required (see gpt ", cmd_, " --help)");
  return str(name, "");
}

int64_t Flags::i64(const std::string& name, int64_t def, int64_t lo, int64_t hi) {
  used_.insert(name);
  auto it = vals_.find(name);
  if (it == vals_.end()) return def;
  const std::string& s = it->second;
  char* end = nullptr;
  errno = 0;
  long long v = std::strtoll(s.c_str(), &end, 10);
  GPT_CHECK(!s.empty() && end && *end == '\0' && errno == 0, "gpt ", cmd_, ": ", name, " expects an integer, got '", s, "'");
  GPT_CHECK(v >= lo && v <= hi, "gpt ", cmd_, ": ", name, " must be in [", lo, ", ", hi, "], got ", v);
  return v;
}

double Flags::f64(const std::string& name, double def, double lo, double hi) {
  used_.insert(name);
  auto it = vals_.find(name);
  if (it == vals_.end()) return def;
  const std::string& s = it->second;
  char* end = nullptr;
  errno = 0;
  double v = std::strtod(s.c_str(), &end);
  GPT_CHECK(!s.empty() && end && *end == '\0' && errno == 0 && std::isfinite(v), "gpt ", cmd_, ": ", name,
            " expects a number, got '", s, "'");
  GPT_CHECK(v >= lo && v <= hi, "gpt ", cmd_, ": ", name, " must be in [", lo, ", ", hi, "], got ", v);
  return v;
}

bool Flags::on(const std::string& name) {
  used_.insert(name);
  return has(name);
}

void Flags::finish() const {
  for (const auto& kv : vals_)
    GPT_CHECK(used_.count(kv.first), "gpt ", cmd_, ": unknown flag ", kv.first, " (see gpt ", cmd_, " --help)");
}

}  // namespace gpt
