// See mfu_meter.h.
#include "src/runtime/mfu_meter.h"

#include <cmath>

#include "src/core/check.h"

namespace gpt {

namespace {
std::string tflops(double f) { return str(f / 1e12, " TFLOP/s"); }
}  // namespace

MfuMeter::MfuMeter(PeakFlops peak, Remeasure remeasure, Report report)
    : peak_(std::move(peak)), remeasure_(std::move(remeasure)), report_(std::move(report)) {
  GPT_CHECK(peak_.flops > 0 && std::isfinite(peak_.flops), "MFU: the peak must be a positive number of FLOP/s, got ",
            peak_.flops, " (", peak_.source, ")");
}

double MfuMeter::mfu(double rate) {
  GPT_CHECK(peak_.flops > 0, "MFU: no peak was set");
  GPT_CHECK(rate >= 0 && std::isfinite(rate), "MFU: a step's rate must be a finite number of FLOP/s, got ", rate);
  if (rate > peak_.flops) raise(rate);
  return rate / peak_.flops;
}

void MfuMeter::raise(double rate) {
  if (!raised_) {  // the first time: measure again, and say what happened in one line
    raised_ = true;
    std::string line = str("MFU: a step ran at ", tflops(rate), " per rank, above the peak ", tflops(peak_.flops),
                           " (", peak_.source, ")");
    if (remeasure_) {
      const PeakFlops fresh = remeasure_();
      line += str("; measured again: ", tflops(fresh.flops));
      if (fresh.flops > peak_.flops) peak_ = fresh;
    }
    line += rate > peak_.flops ? str("; the step's rate is the peak from here (the highest rate measured here)")
                               : str("; MFU is measured against ", tflops(peak_.flops), " from here");
    if (report_) report_(line);
    measured_ = peak_;
  }
  if (rate > peak_.flops)  // the step is the highest rate measured (a later one is not reported again)
    peak_ = {rate, str("the fastest training step of this run, in model FLOPs; measured before it: ",
                       tflops(measured_.flops), " (", measured_.source, ")")};
}

}  // namespace gpt
