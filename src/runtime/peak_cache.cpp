// See peak_cache.h. The file:
//   {"format": "gpt cpu peak cache", "version": 1, "entries": [
//     {"cpu": "AMD EPYC", "threads": 2, "blas": "OpenBLAS 0.3.21, Zen kernels", "peak_flops": 2.05e+11,
//      "bursts": 10, "span_s": 5.71, "measured": "2026-12-03 10:40 UTC"}, ...]}
#include "src/runtime/peak_cache.h"

#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <vector>

#include "src/core/check.h"
#include "src/io/atomic_file.h"
#include "src/io/json_fields.h"

namespace gpt {

namespace {

constexpr const char* kFormat = "gpt cpu peak cache";
constexpr int kVersion = 1;
const char* kCure = " (delete the file, or rerun gpt bench --calibrate to rewrite it)";

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

CachedPeak read_entry(const JsonValue& v, size_t i, const std::string& file) {
  JsonFields o(v, str("entries[", i, "]"), file);
  CachedPeak e;
  e.key.cpu = o.need_text("cpu");
  e.key.threads = (int)o.need_int("threads", 1, 1 << 20);
  e.key.blas = o.need_text("blas");
  e.flops = o.need_num("peak_flops", 1e3, 1e18);
  e.bursts = (int)o.need_int("bursts", 1, 1 << 20);
  e.span_s = o.need_num("span_s", 0, 1e6);
  e.measured = o.need_text("measured");
  o.finish();
  return e;
}

// Every entry of the file; throws naming the file and the field for anything but a valid cache.
std::vector<CachedPeak> read_entries(const std::string& file) {
  const std::string text = read_file(file);
  const JsonValue root = parse_json(text, file);
  JsonFields top(root, "", file);
  GPT_CHECK(top.need_text("format") == kFormat, file, ": field format: expected \"", kFormat, "\"");
  const int64_t version = top.need_int("version", 0, 1 << 20);
  GPT_CHECK(version == kVersion, file, ": field version: ", version, " is not ", kVersion, ", the version this gpt reads");
  const JsonValue& list = top.need("entries");
  GPT_CHECK(list.kind == JsonValue::Kind::array, file, ": field entries: expected an array, got ", list.kind_name());
  top.finish();
  std::vector<CachedPeak> out;
  for (size_t i = 0; i < list.items.size(); i++) {
    CachedPeak e = read_entry(list.items[i], i, file);
    for (const CachedPeak& o : out)
      GPT_CHECK(!(o.key == e.key), file, ": field entries[", i, "]: a second entry for ", e.key.cpu, ", ",
                e.key.blas, ", ", e.key.threads, " threads");
    out.push_back(e);
  }
  return out;
}

std::string to_json(const std::vector<CachedPeak>& entries) {
  std::string s = str("{\"format\": ", json_quote(kFormat), ", \"version\": ", kVersion, ", \"entries\": [");
  for (size_t i = 0; i < entries.size(); i++) {
    const CachedPeak& e = entries[i];
    char num[64], span[64];
    std::snprintf(num, sizeof num, "%.17g", e.flops);
    std::snprintf(span, sizeof span, "%.3f", e.span_s);
    s += str(i ? ",\n" : "\n", "  {\"cpu\": ", json_quote(e.key.cpu), ", \"threads\": ", e.key.threads,
             ", \"blas\": ", json_quote(e.key.blas), ", \"peak_flops\": ", num, ", \"bursts\": ", e.bursts,
             ", \"span_s\": ", span, ", \"measured\": ", json_quote(e.measured), "}");
  }
  return s + "\n]}\n";
}

}  // namespace

std::string peak_cache_file() {
  std::string dir = env("GPT_CACHE_DIR");
  if (dir.empty() && !env("XDG_CACHE_HOME").empty()) dir = env("XDG_CACHE_HOME") + "/gpt";
  if (dir.empty() && !env("HOME").empty()) dir = env("HOME") + "/.cache/gpt";
  return dir.empty() ? "" : dir + "/cpu_peak.json";
}

std::optional<CachedPeak> read_cached_peak(const std::string& file, const CpuPeakKey& key) {
  std::error_code ec;
  if (file.empty() || !std::filesystem::exists(file, ec)) return std::nullopt;
  try {
    for (const CachedPeak& e : read_entries(file))
      if (e.key == key) return e;
  } catch (const Error& e) {
    fail("CPU peak cache ", e.what(), kCure);
  }
  return std::nullopt;
}

std::string write_cached_peak(const std::string& file, const CachedPeak& entry) {
  GPT_CHECK(!file.empty(), "CPU peak cache: no directory for it: set GPT_CACHE_DIR (or XDG_CACHE_HOME or HOME)");
  std::vector<CachedPeak> entries;
  std::string note;
  std::error_code ec;
  if (std::filesystem::exists(file, ec)) {
    try {
      entries = read_entries(file);
    } catch (const Error& e) {
      note = str("replacing a CPU peak cache that is not valid: ", e.what());
    }
  }
  bool replaced = false;
  for (CachedPeak& e : entries)
    if (e.key == entry.key) e = entry, replaced = true;
  if (!replaced) entries.push_back(entry);
  const std::filesystem::path dir = std::filesystem::path(file).parent_path();
  if (!dir.empty()) {
    std::filesystem::create_directories(dir, ec);
    GPT_CHECK(!ec, "CPU peak cache ", file, ": cannot make its directory: ", ec.message());
  }
  const std::string text = to_json(entries);
  write_file_atomic(file, text.data(), text.size());
  return note;
}

PeakFlops cached_peak_flops(const CachedPeak& e, const std::string& file) {
  return {e.flops, cpu_peak_source(e.key, e.bursts, e.span_s, str(", calibrated ", e.measured, ", cached in ", file))};
}

}  // namespace gpt
