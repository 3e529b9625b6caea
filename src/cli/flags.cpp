// See flags.h.
#include "src/cli/flags.h"

#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <filesystem>

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
    const size_t eq = a.find('=');
    GPT_CHECK(a.rfind("--", 0) != 0 || eq == std::string::npos, "gpt ", cmd_, ": write '", a.substr(0, eq), " ",
              a.substr(eq + 1), "', not '", a, "'");
    GPT_CHECK(!vals_.count(a), "gpt ", cmd_, ": flag ", a, " given twice");
    if (switches.count(a)) {
      vals_[a] = "1";
      continue;
    }
    // The last argument with no value: an error once an accessor asks for it, or finish() calls it unknown.
    if (i + 1 == argc) {
      missing_value_.insert(a);
      vals_[a] = "";
      continue;
    }
    vals_[a] = argv[++i];
  }
}

const std::string* Flags::given(const std::string& name) {
  used_.insert(name);
  auto it = vals_.find(name);
  if (it == vals_.end()) return nullptr;
  GPT_CHECK(!missing_value_.count(name), "gpt ", cmd_, ": flag ", name, " needs a value");
  return &it->second;
}

bool Flags::has(const std::string& name) const { return vals_.count(name) > 0; }

std::string Flags::str(const std::string& name, const std::string& def) {
  const std::string* v = given(name);
  if (!v) return def;
  GPT_CHECK(!v->empty(), "gpt ", cmd_, ": ", name, " expects a value, got an empty string");
  return *v;
}

std::string Flags::text(const std::string& name, const std::string& def) {
  const std::string* v = given(name);
  return v ? *v : def;
}

std::string Flags::required(const std::string& name) {
  GPT_CHECK(has(name), "gpt ", cmd_, ": ", name, " is required (see gpt ", cmd_, " --help)");
  return str(name, "");
}

namespace {
// What strtoll / strtod would also take but a number on a command line should not have: leading spaces, and
// (for strtod) hexadecimal notation.
bool plain_number(const std::string& s) {
  return !s.empty() && !std::isspace(static_cast<unsigned char>(s[0])) && s.find_first_of("xX") == std::string::npos;
}
}  // namespace

int64_t Flags::i64(const std::string& name, int64_t def, int64_t lo, int64_t hi) {
  const std::string* given_value = given(name);
  if (!given_value) return def;
  const std::string& s = *given_value;
  char* end = nullptr;
  errno = 0;
  long long v = std::strtoll(s.c_str(), &end, 10);
  GPT_CHECK(plain_number(s) && end && *end == '\0' && errno == 0, "gpt ", cmd_, ": ", name, " expects an integer, got '", s, "'");
  GPT_CHECK(v >= lo && v <= hi, "gpt ", cmd_, ": ", name, " must be in [", lo, ", ", hi, "], got ", v);
  return v;
}

double Flags::f64(const std::string& name, double def, double lo, double hi) {
  const std::string* given_value = given(name);
  if (!given_value) return def;
  const std::string& s = *given_value;
  char* end = nullptr;
  errno = 0;
  double v = std::strtod(s.c_str(), &end);
  GPT_CHECK(plain_number(s) && end && *end == '\0' && errno == 0 && std::isfinite(v), "gpt ", cmd_, ": ", name,
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

void check_output_file(const std::string& flag, const std::string& path, const std::string& input_flag,
                       const std::string& input) {
  std::error_code ec;
  GPT_CHECK(!std::filesystem::is_directory(path, ec), flag, " ", path, ": is a directory; give a file path");
  GPT_CHECK(!std::filesystem::equivalent(path, input, ec), flag, " ", path, " is the ", input_flag,
            " file itself; give another path");
}

}  // namespace gpt
