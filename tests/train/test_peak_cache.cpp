// The cache of the calibrated CPU peak (src/runtime/peak_cache.h): written atomically and read back, used
// for its own key only (CPU model, OpenBLAS threads, OpenBLAS kernels), found through GPT_CACHE_DIR, then
// XDG_CACHE_HOME, then HOME; a file that is not a valid cache is a one-line error naming it, never a peak.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "src/backend/backend.h"
#include "src/io/atomic_file.h"
#include "src/runtime/peak_cache.h"
#include "src/runtime/runtime.h"
#include "tests/common/error_of.h"
#include "tests/common/json_lite.h"
#include "tests/common/test_paths.h"

namespace gpt::test {
namespace {

CachedPeak entry(const std::string& cpu, int threads, const std::string& blas, double flops) {
  CachedPeak e;
  e.key = {cpu, threads, blas};
  e.flops = flops;
  e.bursts = 10;
  e.span_s = 5.5;
  e.measured = "2026-12-03 10:40 UTC";
  return e;
}

void write_text(const std::string& path, const std::string& text) { std::ofstream(path) << text; }

TEST(PeakCache, WrittenReadBackAndKeyed) {
  const std::string f = scratch_dir() + "/sub/cpu_peak.json";  // its directory is made
  const CachedPeak a = entry("AMD EPYC", 2, "OpenBLAS 0.3.21, Zen kernels", 2.0512345678901234e11);
  EXPECT_EQ(write_cached_peak(f, a), "");
  const auto back = read_cached_peak(f, a.key);
  ASSERT_TRUE(back);
  EXPECT_EQ(back->flops, a.flops);  // %.17g: exactly
  EXPECT_EQ(back->bursts, 10);
  EXPECT_EQ(back->measured, a.measured);
  // Another thread count, CPU or kernel set is another key: not used.
  EXPECT_FALSE(read_cached_peak(f, {"AMD EPYC", 1, "OpenBLAS 0.3.21, Zen kernels"}));
  EXPECT_FALSE(read_cached_peak(f, {"Intel Xeon", 2, "OpenBLAS 0.3.21, Zen kernels"}));
  EXPECT_FALSE(read_cached_peak(f, {"AMD EPYC", 2, "OpenBLAS 0.3.21, Haswell kernels"}));
  // A second key is added beside the first; rewriting the first replaces it and keeps the second.
  const CachedPeak b = entry("AMD EPYC", 1, "OpenBLAS 0.3.21, Zen kernels", 1.1e11);
  write_cached_peak(f, b);
  CachedPeak a2 = a;
  a2.flops = 2.2e11;
  write_cached_peak(f, a2);
  EXPECT_EQ(read_cached_peak(f, a.key)->flops, 2.2e11);
  EXPECT_EQ(read_cached_peak(f, b.key)->flops, 1.1e11);
  // The file as another JSON reader sees it: two entries, the fields by name.
  const JValue j = JsonParser(read_file(f)).parse();
  ASSERT_EQ(j.at("entries").arr.size(), 2u);
  EXPECT_EQ(j.at("entries").arr[0].at("threads").num, 2);
  EXPECT_EQ(j.at("entries").arr[0].at("peak_flops").num, 2.2e11);
  EXPECT_EQ(j.at("entries").arr[1].at("blas").str, "OpenBLAS 0.3.21, Zen kernels");
  // No temp file is left beside it (atomic write: temp, fsync, rename).
  int files = 0;
  for (const auto& d : std::filesystem::directory_iterator(std::filesystem::path(f).parent_path())) files += d.is_regular_file();
  EXPECT_EQ(files, 1);
  EXPECT_FALSE(read_cached_peak(scratch_dir() + "/absent.json", a.key));  // no file: no entry, no error
}

TEST(PeakCache, ACorruptFileIsAnErrorNamingIt) {
  const std::string f = scratch_dir() + "/cpu_peak.json";
  const std::string head = R"({"format": "gpt cpu peak cache", "version": 1, "entries": [)";
  const std::string ok = R"({"cpu": "X", "threads": 2, "blas": "B", "peak_flops": 1e11, "bursts": 3, "span_s": 1.0, "measured": "d"})";
  const std::pair<std::string, std::string> cases[] = {
      {"", "byte 0"},
      {"{\"format\": \"gpt cpu peak cache\", \"version\": 1, \"entries\": [", "byte"},  // torn
      {"[]", "expected an object"},
      {R"({"format": "other", "version": 1, "entries": []})", "field format"},
      {R"({"format": "gpt cpu peak cache", "version": 2, "entries": []})", "field version"},
      {R"({"format": "gpt cpu peak cache", "version": 1, "entries": {}})", "field entries: expected an array"},
      {R"({"format": "gpt cpu peak cache", "version": 1, "entries": [], "extra": 1})", "field extra: unknown field"},
      {head + R"({"cpu": "X", "threads": 2, "blas": "B", "bursts": 3, "span_s": 1.0, "measured": "d"}]})",
       "field entries[0].peak_flops: missing"},
      {head + R"({"cpu": "X", "threads": 2.5, "blas": "B", "peak_flops": 1e11, "bursts": 3, "span_s": 1, "measured": "d"}]})",
       "field entries[0].threads"},
      {head + R"({"cpu": "X", "threads": 0, "blas": "B", "peak_flops": 1e11, "bursts": 3, "span_s": 1, "measured": "d"}]})",
       "field entries[0].threads"},
      {head + R"({"cpu": "X", "threads": 2, "blas": "B", "peak_flops": 0, "bursts": 3, "span_s": 1, "measured": "d"}]})",
       "field entries[0].peak_flops"},
      {head + R"({"cpu": "X", "threads": 2, "blas": "B", "peak_flops": 1e999, "bursts": 3, "span_s": 1, "measured": "d"}]})",
       "field entries[0].peak_flops"},
      {head + R"({"cpu": 7, "threads": 2, "blas": "B", "peak_flops": 1e11, "bursts": 3, "span_s": 1, "measured": "d"}]})",
       "field entries[0].cpu: expected a string"},
      {head + ok + ", " + ok + "]}", "a second entry for X"},
  };
  for (const auto& [text, needle] : cases) {
    write_text(f, text);
    const std::string e = error_of([&] { read_cached_peak(f, {"X", 2, "B"}); });
    EXPECT_NE(e.find(f), std::string::npos) << text << "\n" << e;
    EXPECT_NE(e.find(needle), std::string::npos) << text << "\n" << e;
    EXPECT_NE(e.find("rerun gpt bench --calibrate"), std::string::npos) << e;
    EXPECT_EQ(e.find('\n'), std::string::npos) << e;
    // Corrupt for any key: a key the file does not hold is no excuse to read past it.
    EXPECT_NE(error_of([&] { read_cached_peak(f, {"Y", 1, "C"}); }), "(no error)") << text;
  }
  write_text(f, head + ok + "]}");
  EXPECT_EQ(read_cached_peak(f, {"X", 2, "B"})->flops, 1e11);  // the valid form of the same file reads
  // Writing replaces a corrupt file, and says so.
  write_text(f, "{ not json");
  const std::string note = write_cached_peak(f, entry("X", 2, "B", 3e11));
  EXPECT_NE(note.find(f), std::string::npos) << note;
  EXPECT_EQ(read_cached_peak(f, {"X", 2, "B"})->flops, 3e11);
}

TEST(PeakCache, FoundThroughGptCacheDirThenXdgThenHome) {
  ScopedEnv home("HOME", "/h"), xdg("XDG_CACHE_HOME", "/x");
  {
    ScopedEnv own("GPT_CACHE_DIR", "/g");
    EXPECT_EQ(peak_cache_file(), "/g/cpu_peak.json");
  }
  {
    ScopedEnv own("GPT_CACHE_DIR", "");
    EXPECT_EQ(peak_cache_file(), "/x/gpt/cpu_peak.json");
    ScopedEnv no_xdg("XDG_CACHE_HOME", "");
    EXPECT_EQ(peak_cache_file(), "/h/.cache/gpt/cpu_peak.json");
    ScopedEnv no_home("HOME", "");
    EXPECT_EQ(peak_cache_file(), "");
    EXPECT_NE(error_of([] { write_cached_peak("", entry("X", 1, "B", 1e9)); }).find("set GPT_CACHE_DIR"), std::string::npos);
  }
}

// The run's peak: the cached calibration of this CPU's own key when there is one, else a measurement;
// --peak-tflops over both; a corrupt cache stops the run naming the file.
TEST(PeakCache, TheRunsPeakIsTheCalibrationOfItsOwnKey) {
  const std::string dir = scratch_dir();
  ScopedEnv cache("GPT_CACHE_DIR", dir);
  const std::string f = dir + "/cpu_peak.json";
  auto be = make_backend("cpu");
  const CpuPeakKey mine = this_cpu_peak_key();
  CpuPeakKey other = mine;
  other.threads += 1;
  write_cached_peak(f, entry(other.cpu, other.threads, other.blas, 9.75e13));
  const PeakFlops measured = mfu_peak(*be, 0);
  EXPECT_NE(measured.flops, 9.75e13);
  EXPECT_EQ(measured.source.find("calibrated"), std::string::npos) << measured.source;
  write_cached_peak(f, entry(mine.cpu, mine.threads, mine.blas, 1.25e13));
  const PeakFlops cached = mfu_peak(*be, 0);
  EXPECT_EQ(cached.flops, 1.25e13);
  EXPECT_EQ(cached.source.rfind("this CPU's measured fp32 sgemm (", 0), 0u) << cached.source;
  EXPECT_NE(cached.source.find("calibrated 2026-12-03 10:40 UTC, cached in " + f), std::string::npos) << cached.source;
  EXPECT_EQ(mfu_peak(*be, 2).flops, 2e12);
  write_text(f, "{\"format\": 1");
  EXPECT_NE(error_of([&] { mfu_peak(*be, 0); }).find(f), std::string::npos);
  EXPECT_EQ(mfu_peak(*be, 2).source, "--peak-tflops");  // the flag needs no cache
}

}  // namespace
}  // namespace gpt::test
