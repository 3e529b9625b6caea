// A one-line progress bar on stderr for long jobs (tokenizing a corpus, training steps): fraction done,
// amount done, rate and ETA. It redraws at most ~10 times a second and only when stderr is a terminal
// (or when forced), so logs and pipes stay clean.
#pragma once
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>

namespace gpt {

class ProgressBar {
 public:
  enum class Unit { Bytes, Count };  // Bytes: shown as MB and MB/s; Count: plain numbers and "<name>/s"

  // total <= 0 means unknown (no bar, no ETA). count_name names a Count unit ("steps", "tokens").
  ProgressBar(std::string label, int64_t total, Unit unit = Unit::Bytes, bool force = false,
              FILE* out = stderr, std::string count_name = "it");
  ~ProgressBar();  // finishes the line if something was drawn
  ProgressBar(const ProgressBar&) = delete;
  ProgressBar& operator=(const ProgressBar&) = delete;

  void update(int64_t done);  // absolute progress; draws when >= 100 ms passed since the last draw
  void finish();              // draws the final state and ends the line (idempotent)
  bool enabled() const { return enabled_; }

  // The line without "\r", for a given state (pure, for tests and for callers that log it).
  std::string render(int64_t done, double elapsed_s) const;

 private:
  void draw(int64_t done);

  std::string label_, count_name_;
  int64_t total_;
  Unit unit_;
  FILE* out_;
  bool enabled_ = false, drawn_ = false, finished_ = false;
  int64_t last_done_ = 0;
  size_t last_width_ = 0;
  std::chrono::steady_clock::time_point start_, last_draw_;
};

// "1:02:03" or "2:03" for a duration in seconds (negative or non-finite -> "?").
std::string format_duration(double seconds);

}  // namespace gpt
