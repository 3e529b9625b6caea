// The one error path of the project. A user mistake (bad flag, bad file, impossible config) or a failed
// library call becomes a gpt::Error carrying one line that names the culprit and what was expected.
// main() prints it as "error: <line>" and exits non-zero; tests catch it with EXPECT_THROW.
#pragma once
#include <sstream>
#include <stdexcept>
#include <string>

namespace gpt {

struct Error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

namespace detail {
inline void append(std::ostringstream&) {}
template <typename T, typename... Rest>
void append(std::ostringstream& os, const T& v, const Rest&... rest) {
  os << v;
  append(os, rest...);
}
}  // namespace detail

// Builds a message from any streamable pieces: gpt::str("file ", path, ": expected ", n, " bytes").
template <typename... Args>
std::string str(const Args&... args) {
  std::ostringstream os;
  detail::append(os, args...);
  return os.str();
}

template <typename... Args>
[[noreturn]] void fail(const Args&... args) {
  throw Error(str(args...));
}

}  // namespace gpt

// GPT_CHECK(cond, pieces...): if cond is false, throw gpt::Error with the concatenated pieces.
#define GPT_CHECK(cond, ...)                 \
  do {                                       \
    if (!(cond)) ::gpt::fail(__VA_ARGS__);   \
  } while (0)
