// MFU, and the one rule that keeps it honest: the peak a rate is set against is the highest rate measured
// on this machine in this run, so that no measured rate exceeds it and MFU never reads above 100%.
//
// The peak starts as a measurement (the backend's sgemm bursts, or their cached calibration) or a stated
// figure (--peak-tflops, a GPU's datasheet peak). A step that runs faster than it shows the peak was
// measured low (a slow instant covering the whole start-up measurement) or stated low. Then, once:
//  1. the peak is measured again (Backend::remeasure_peak_flops: the CPU's bursts over a longer span; a
//     stated figure has nothing to measure), and the better of the two measurements is kept;
//  2. if the step's rate is still above it, the step's rate is the peak: the step is itself a measurement
//     of what this machine does, of the same FLOPs that MFU counts (the model's 6n + 12LCT per token), so
//     the machine's peak is at least that. MFU reads 100% for that step, meaning "as fast as anything
//     measured here", and a later step faster still raises it the same way (without measuring again);
//  3. one line says what happened (rate, old peak and its source, the re-measured one, the new peak).
// Re-measuring alone would not guarantee MFU <= 100%: the re-measurement can meet a slow instant as well,
// and the model's matmuls can outrun a 768^3 sgemm on a many-core CPU. Step 2 is no clamp of the ratio:
// the denominator is a rate this machine was measured to reach, and the source of the peak says so.
#pragma once
#include <functional>
#include <string>

#include "src/backend/device_info.h"

namespace gpt {

class MfuMeter {
 public:
  using Remeasure = std::function<PeakFlops()>;             // a fresh measurement; empty for a stated figure
  using Report = std::function<void(const std::string&)>;  // where the one line goes
  MfuMeter() = default;
  MfuMeter(PeakFlops peak, Remeasure remeasure, Report report);

  // The fraction of the peak that `rate` is: the model FLOP/s per rank that a step (or a median of steps)
  // was measured to reach. Applies the rule above first, so the result is in [0, 1].
  double mfu(double rate);
  const PeakFlops& peak() const { return peak_; }  // per rank; raised by the rule, never lowered
  bool raised() const { return raised_; }          // whether a step has beaten a peak in this run

 private:
  void raise(double rate);

  PeakFlops peak_;
  PeakFlops measured_;  // the best peak that is not a step's rate, once a step has beaten one
  Remeasure remeasure_;
  Report report_;
  bool raised_ = false;
};

}  // namespace gpt
