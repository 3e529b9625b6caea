// Small helpers shared by the libFuzzer harnesses of tests/fuzz: a per-process scratch directory for
// readers that take a path, plain file writes (no fsync: the input must be cheap to stage), splitting
// one input into several files at a separator, and the one rule of every harness — gpt::Error is the
// expected answer to a bad file, anything else (crash, sanitizer report, other exception) must surface.
// FUZZ_VERBOSE=1 prints each gpt::Error, to check by hand how deep a seed gets.
#pragma once
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "src/core/check.h"

namespace gpt::fuzz {

// Separator that splits one fuzz input into several files (seeds contain it; libFuzzer learns it from
// the memmem comparison in split()).
constexpr std::string_view kSeparator = "@@FILE@@";

inline bool verbose() {
  static const bool v = [] {
    const char* e = std::getenv("FUZZ_VERBOSE");
    return e && *e && *e != '0';
  }();
  return v;
}

// A fresh directory for this process under $FUZZ_SCRATCH (scripts/fuzz.sh sets it and removes it, so a
// crashed run leaves nothing behind), else on tmpfs when there is one; removed at a normal exit.
inline const std::string& scratch_dir() {
  static const std::string dir = [] {
    std::string base = "/dev/shm";
    if (const char* s = std::getenv("FUZZ_SCRATCH"); s && *s) {
      base = s;
      std::filesystem::create_directories(base);
    } else if (!std::filesystem::is_directory(base)) {
      const char* t = std::getenv("TMPDIR");
      base = t && *t ? t : "/tmp";
    }
    std::string tmpl = base + "/gpt-fuzz-XXXXXX";
    std::vector<char> buf(tmpl.begin(), tmpl.end());
    buf.push_back('\0');
    if (!::mkdtemp(buf.data())) {
      std::perror("fuzz: mkdtemp");
      std::abort();
    }
    std::string d(buf.data());
    static const std::string keep = d;  // for the atexit handler below
    std::atexit([] {
      std::error_code ec;
      std::filesystem::remove_all(keep, ec);
    });
    return d;
  }();
  return dir;
}

// Writes bytes to path, replacing it; aborts when the scratch space itself fails (not the reader's fault).
inline void write_bytes(const std::string& path, std::string_view bytes) {
  FILE* f = std::fopen(path.c_str(), "wb");
  if (!f || std::fwrite(bytes.data(), 1, bytes.size(), f) != bytes.size() || std::fclose(f) != 0) {
    std::perror(("fuzz: cannot write " + path).c_str());
    std::abort();
  }
}

inline void remove_file(const std::string& path) { std::remove(path.c_str()); }

// Splits data at every kSeparator; at most max_parts parts (the last one keeps any further separators).
inline std::vector<std::string_view> split(std::string_view data, size_t max_parts) {
  std::vector<std::string_view> parts;
  while (parts.size() + 1 < max_parts) {
    const void* hit = ::memmem(data.data(), data.size(), kSeparator.data(), kSeparator.size());
    if (!hit) break;
    const size_t at = static_cast<size_t>(static_cast<const char*>(hit) - data.data());
    parts.push_back(data.substr(0, at));
    data.remove_prefix(at + kSeparator.size());
  }
  parts.push_back(data);
  return parts;
}

// Runs fn; a gpt::Error is the reader rejecting the input (fine), returns whether fn completed.
template <typename Fn>
bool expect_ok_or_error(Fn&& fn) {
  try {
    fn();
    return true;
  } catch (const Error& e) {
    if (verbose()) std::fprintf(stderr, "fuzz: gpt::Error: %s\n", e.what());
    return false;
  }
}

// A property of accepted input does not hold: report and abort so libFuzzer saves the input.
[[noreturn]] inline void property_failed(const std::string& what) {
  std::fprintf(stderr, "fuzz: property violated: %s\n", what.c_str());
  std::abort();
}

#define FUZZ_REQUIRE(cond, ...)                                       \
  do {                                                                \
    if (!(cond)) ::gpt::fuzz::property_failed(::gpt::str(__VA_ARGS__)); \
  } while (0)

// Little-endian field readers for parameter bytes at the front of an input (zero past the end).
inline uint8_t byte_at(std::string_view s, size_t i) { return i < s.size() ? static_cast<uint8_t>(s[i]) : 0; }

}  // namespace gpt::fuzz
