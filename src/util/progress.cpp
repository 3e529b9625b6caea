// Implementation of util/progress.h: render() builds the text, draw() rewrites the terminal line.
#include "src/util/progress.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <utility>

namespace gpt {

namespace {
constexpr double kMinRedrawSeconds = 0.1;
constexpr int kBarWidth = 24;

std::string fixed(double v, int decimals) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}
}  // namespace

std::string format_duration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "?";
  int64_t s = (int64_t)std::llround(seconds);
  int64_t h = s / 3600, m = (s / 60) % 60, sec = s % 60;
  char buf[64];
  if (h > 0)
    std::snprintf(buf, sizeof buf, "%lld:%02lld:%02lld", (long long)h, (long long)m, (long long)sec);
  else
    std::snprintf(buf, sizeof buf, "%lld:%02lld", (long long)m, (long long)sec);
  return buf;
}

ProgressBar::ProgressBar(std::string label, int64_t total, Unit unit, bool force, FILE* out,
                         std::string count_name)
    : label_(std::move(label)), count_name_(std::move(count_name)), total_(total), unit_(unit), out_(out) {
  enabled_ = out_ != nullptr && (force || ::isatty(::fileno(out_)));
  start_ = last_draw_ = std::chrono::steady_clock::now();
}

ProgressBar::~ProgressBar() {
  if (drawn_ && !finished_) {
    std::fputc('\n', out_);
    std::fflush(out_);
  }
}

std::string ProgressBar::render(int64_t done, double elapsed_s) const {
  const bool bytes = unit_ == Unit::Bytes;
  const double scale = bytes ? 1e-6 : 1.0;
  const std::string u = bytes ? "MB" : count_name_;
  const double rate = elapsed_s > 0 ? done * scale / elapsed_s : 0.0;
  const int dec = bytes ? 1 : 0;
  std::string line = label_.empty() ? "" : label_ + " ";
  if (total_ > 0) {
    double frac = std::clamp((double)done / (double)total_, 0.0, 1.0);
    int fill = (int)(frac * kBarWidth);
    line += "[" + std::string(fill, '#') + std::string(kBarWidth - fill, '.') + "] ";
    line += fixed(100.0 * frac, 1) + "% ";
    line += fixed(done * scale, dec) + "/" + fixed(total_ * scale, dec) + " " + u;
  } else {
    line += fixed(done * scale, dec) + " " + u;
  }
  line += " " + fixed(rate, bytes ? 1 : 2) + " " + u + "/s";
  if (total_ > 0) {
    double eta = rate > 0 ? (total_ - done) * scale / rate : -1.0;
    line += " ETA " + format_duration(done >= total_ ? 0.0 : eta);
  }
  return line;
}

void ProgressBar::draw(int64_t done) {
  auto now = std::chrono::steady_clock::now();
  double elapsed = std::chrono::duration<double>(now - start_).count();
  std::string line = render(done, elapsed);
  size_t width = line.size();
  if (width < last_width_) line += std::string(last_width_ - width, ' ');  // erase the old tail
  std::fprintf(out_, "\r%s", line.c_str());
  std::fflush(out_);
  last_width_ = width;
  last_draw_ = now;
  drawn_ = true;
}

void ProgressBar::update(int64_t done) {
  last_done_ = done;
  if (!enabled_ || finished_) return;
  auto now = std::chrono::steady_clock::now();
  if (drawn_ && std::chrono::duration<double>(now - last_draw_).count() < kMinRedrawSeconds) return;
  draw(done);
}

void ProgressBar::finish() {
  if (finished_) return;
  if (enabled_) {
    draw(last_done_);
    std::fputc('\n', out_);
    std::fflush(out_);
  }
  finished_ = true;
}

}  // namespace gpt
