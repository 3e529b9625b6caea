// The CPU peak for MFU as `gpt bench --calibrate` measured it, kept between runs so that a run need not
// trust the short measurement it makes at start-up. One JSON file, cpu_peak.json, in the first of
// $GPT_CACHE_DIR, $XDG_CACHE_HOME/gpt and $HOME/.cache/gpt that is set (tests set GPT_CACHE_DIR); it holds
// one entry per CPU model x OpenBLAS threads x OpenBLAS kernels (CpuPeakKey), and a run uses the entry of
// its own key only. `gpt bench --calibrate` rewrites its key's entry; deleting the file forgets them all.
//
// A file that is there but is not a valid cache (not JSON, an unknown or missing field, a number out of
// range, one key twice) stops the run with one line naming the file and what is wrong and how to cure it,
// rather than a warning and a fresh measurement: the file is read only to be believed, a project rule
// is that a bad file is an error, and a warning scrolls away in a long run's log while the run goes on
// measured against a peak other than the one its owner calibrated. `gpt bench --calibrate` itself replaces
// a corrupt file (saying so), so the cure never needs the file to parse.
#pragma once
#include <optional>
#include <string>

#include "src/backend/peak_flops.h"

namespace gpt {

struct CachedPeak {
  CpuPeakKey key;
  double flops = 0;      // the calibrated peak, FLOP/s
  int bursts = 0;        // of the measurement (BurstPeak)
  double span_s = 0;
  std::string measured;  // when, "YYYY-MM-DD HH:MM UTC"
};

// The cache file's path, or "" when none of the variables is set.
std::string peak_cache_file();

// The entry for `key`, or none when the file is absent or holds no entry for it. Throws gpt::Error
// "<file>: ..." for a file that is not a valid cache.
std::optional<CachedPeak> read_cached_peak(const std::string& file, const CpuPeakKey& key);

// Writes `entry` into the file atomically (its directory made when missing), replacing the entry of the
// same key and keeping the others. Returns "" or, when the file there was not a valid cache and has been
// replaced, a one-line note saying so.
std::string write_cached_peak(const std::string& file, const CachedPeak& entry);

// The entry as the peak MFU is measured against, its source naming the calibration and the file.
PeakFlops cached_peak_flops(const CachedPeak& entry, const std::string& file);

}  // namespace gpt
