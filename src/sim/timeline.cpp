// See timeline.h.
#include "src/sim/timeline.h"

#include <algorithm>

namespace gpt::sim {

const char* phase_name(Phase p) {
  static const char* n[] = {"forward", "recompute", "backward", "engine", "copies", "exposed_comm", "optimizer",
                            "host_wait"};
  return n[(int)p];
}

double Timeline::now() const { return async_ ? std::max(compute_, host_) : host_; }

void Timeline::charge_gap(double from, double to) {
  if (to <= from) return;
  double covered = 0;
  for (const HostSpan& s : host_log_) {
    const double a = std::max(from, s.t0), b = std::min(to, s.t1);
    if (b > a) {
      phases_[(int)s.p] += b - a;
      covered += b - a;
    }
  }
  phases_[(int)Phase::host_wait] += (to - from) - covered;
  host_log_.erase(std::remove_if(host_log_.begin(), host_log_.end(), [&](const HostSpan& s) { return s.t1 <= to; }),
                  host_log_.end());
}

double Timeline::compute(double d, Phase p) {
  compute_ops_++;
  if (is_model_phase(p)) stretch_ += d;
  if (!async_) return host(d, p);
  const double start = std::max(compute_, host_);
  charge_gap(compute_, start);
  compute_ = start + d;
  phases_[(int)p] += d;
  return compute_;
}

double Timeline::host(double d, Phase p) {
  const double t0 = host_;
  host_ += d;
  if (!async_)
    phases_[(int)p] += d;
  else if (d > 0)
    host_log_.push_back({t0, host_, p});
  return host_;
}

uint64_t Timeline::copy(double d, bool to_host, double* start) {
  double s = host_, e = 0;
  if (async_) {
    double& stream = copy_[to_host ? 1 : 0];
    s = std::max({stream, compute_, host_});
    e = stream = s + d;
  } else {
    e = host(d, Phase::copies);
    s = e - d;
  }
  if (start) *start = s;
  copies_.push_back(e);
  return copies_.size();
}

void Timeline::compute_waits(double t, Phase cause) {
  if (!async_) return host_waits(t, cause);
  if (t <= compute_) return;
  phases_[(int)cause] += t - compute_;
  compute_ = t;
}

void Timeline::host_waits(double t, Phase cause) {
  if (t <= host_) return;
  if (!async_)
    phases_[(int)cause] += t - host_;
  else
    host_log_.push_back({host_, t, cause});
  host_ = t;
}

// As the cuda backend's synchronize: the compute and copy streams and the host, not the comm stream (every
// collective of a step is waited for on the compute stream before the step reads its loss).
void Timeline::synchronize() {
  if (!async_) return;
  const double end = std::max({compute_, copy_[0], copy_[1], host_});
  charge_gap(compute_, end);  // the compute stream's tail: the host's work by its phase, else host_wait
  compute_ = host_ = end;
  host_log_.clear();
}

int Timeline::add_channel() {
  channels_.push_back(0);
  return (int)channels_.size() - 1;
}

double Timeline::on_channel(int channel, double d, double ready, double* start) {
  double& f = channels_[channel];
  const double s = std::max(f, ready);
  f = s + d;
  if (start) *start = s;
  return f;
}

void Timeline::waited_at_once() {
  if (first_stretch_ < 0)
    first_stretch_ = stretch_;
  else
    longest_stretch_ = std::max(longest_stretch_, stretch_);
  stretch_ = 0;
}

double Timeline::longest_stretch() const {
  return first_stretch_ < 0 ? stretch_ : std::max(longest_stretch_, first_stretch_ + stretch_);
}

void Timeline::restart() {
  synchronize();
  host_ = compute_ = copy_[0] = copy_[1] = 0;
  for (double& c : channels_) c = 0;
  for (double& c : copies_) c = 0;  // copies of the set-up are done
  host_log_.clear();
  phases_.fill(0);
  stretch_ = 0, first_stretch_ = -1, longest_stretch_ = 0;
}

}  // namespace gpt::sim
