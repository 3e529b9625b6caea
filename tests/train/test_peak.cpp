// The CPU peak for MFU against a host that is slow at chosen instants (a staged clock: each product takes
// a set time, slow or not, and pauses pass as asked), and the rule that keeps MFU at or below 100%: a step
// faster than the peak has it measured again once, and a step still faster is the peak.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "src/backend/peak_flops.h"
#include "src/core/check.h"
#include "src/dist/comm_world.h"
#include "src/runtime/mfu_meter.h"
#include "src/train/trainer.h"
#include "tests/common/test_paths.h"
#include "tests/common/tiny_trainer.h"

namespace gpt::test {
namespace {

constexpr double kFlop = 2.0 * 768 * 768 * 768;  // one product
constexpr double kFast = 0.006;                  // s per product on the quiet host: kFlop / kFast FLOP/s
constexpr double kSlowdown = 6;                  // the slow instant: every product takes 6x as long

// A host whose products are kSlowdown times slower while the clock is before slow_until.
struct StagedHost {
  double t = 100;  // the clock
  double slow_until = 0;
  int products = 0;
  PeakProbe probe() {
    PeakProbe p;
    p.now = [this] { return t; };
    p.pause = [this](double s) { t += s; };
    p.product = [this] {
      t += t < slow_until ? kFast * kSlowdown : kFast;
      products++;
    };
    p.flop_per_product = kFlop;
    return p;
  }
};

double rel(double a, double b) { return std::abs(a - b) / b; }

TEST(PeakBursts, AQuietHostIsRatedAtItsRate) {
  StagedHost h;
  const BurstPeak b = measure_burst_peak(kStartupPeak, h.probe());
  EXPECT_LT(rel(b.flops, kFlop / kFast), 1e-9);
  EXPECT_EQ(b.bursts, kStartupPeak.bursts);
  // 10 + 20 + ... + 320 ms of pauses, and 7 bursts of 5 products of 6 ms (1 untimed, 4 timed to pass 20 ms)
  EXPECT_LT(rel(b.span_s, 0.63 + 7 * 5 * kFast), 1e-9);
}

// The slow instant that rated a shared 2-core host six times low lasted past a quarter-second window. Here
// it lasts up to 0.8 s, just short of where a quiet host's last burst starts (0.63 s of pauses + 6 bursts
// of 30 ms = 0.81 s): it still cannot decide the peak, because a burst falls outside it (a slow burst only
// pushes the later ones later).
TEST(PeakBursts, ASlowInstantDoesNotDecideThePeak) {
  for (double slow : {0.3, 0.5, 0.8}) {
    StagedHost h;
    h.slow_until = h.t + slow;
    const BurstPeak b = measure_burst_peak(kStartupPeak, h.probe());
    EXPECT_LT(rel(b.flops, kFlop / kFast), 1e-9) << "slow for the first " << slow << " s";
  }
  // The same stall decides a measurement whose timings all sit in one quarter-second window (no pauses:
  // two bursts of 3 slow products), as the measurement before this rule did.
  StagedHost w;
  w.slow_until = w.t + 0.3;
  const BurstPeak one_window = measure_burst_peak(PeakSchedule{2, 0.0, 0.02}, w.probe());
  EXPECT_LT(one_window.span_s, 0.3);
  EXPECT_LT(rel(one_window.flops, kFlop / (kFast * kSlowdown)), 1e-9);
}

// What bursts cannot defeat: a slowdown lasting the whole span. Then the step rule takes over (below).
TEST(PeakBursts, ASlowdownOverTheWholeSpanIsMeasured) {
  StagedHost h;
  h.slow_until = 1e9;
  const BurstPeak b = measure_burst_peak(kStartupPeak, h.probe());
  EXPECT_LT(rel(b.flops, kFlop / (kFast * kSlowdown)), 1e-9);
}

TEST(PeakBursts, ThreeSchedulesSpanLongerAndLonger) {
  StagedHost a, b, c;
  const double s1 = measure_burst_peak(kStartupPeak, a.probe()).span_s;
  const double s2 = measure_burst_peak(kRemeasurePeak, b.probe()).span_s;
  const double s3 = measure_burst_peak(kCalibratePeak, c.probe()).span_s;
  EXPECT_GT(s1, 0.6);
  EXPECT_GT(s2, 2 * s1);
  EXPECT_GT(s3, 1.5 * s2);
}

struct Meter {
  std::vector<std::string> lines;
  int remeasures = 0;
  MfuMeter make(double peak, std::function<double()> again) {
    MfuMeter::Remeasure r;
    if (again)
      r = [this, again] {
        remeasures++;
        return PeakFlops{again(), "measured again"};
      };
    return MfuMeter({peak, "start-up"}, r, [this](const std::string& l) { lines.push_back(l); });
  }
};

// The user's case end to end: start-up meets a slowdown over its whole span (peak 6x low); the first step
// runs at 90% of the quiet rate, above that peak; the peak is measured again once the host is quiet,
// and MFU reads 90%, never above 100%.
TEST(MfuMeter, ASlowStartUpPeakIsMeasuredAgainOnceAndMfuStaysAtMost1) {
  StagedHost h;
  h.slow_until = 1e9;
  const double low = measure_burst_peak(kStartupPeak, h.probe()).flops;
  Meter m;
  MfuMeter meter = m.make(low, [&h] {
    h.slow_until = 0;  // the host is quiet again
    return measure_burst_peak(kRemeasurePeak, h.probe()).flops;
  });
  const double quiet = kFlop / kFast;
  const double step = 0.9 * quiet;
  ASSERT_GT(step, low);
  const double first = meter.mfu(step);
  EXPECT_LT(rel(first, 0.9), 1e-9);
  EXPECT_LT(rel(meter.peak().flops, quiet), 1e-9);
  EXPECT_EQ(meter.peak().source, "measured again");
  EXPECT_EQ(m.remeasures, 1);
  ASSERT_EQ(m.lines.size(), 1u);
  EXPECT_NE(m.lines[0].find("above the peak"), std::string::npos) << m.lines[0];
  EXPECT_NE(m.lines[0].find("measured again"), std::string::npos) << m.lines[0];
  EXPECT_EQ(m.lines[0].find('\n'), std::string::npos);
  for (double f : {0.5, 0.99, 1.0}) EXPECT_LE(meter.mfu(f * quiet), 1.0);
  EXPECT_EQ(m.remeasures, 1);
  EXPECT_EQ(m.lines.size(), 1u);
}

// A re-measurement that is still below the step (it met a slow instant too, or the model's matmuls outrun
// the sgemm): the step's rate is the peak, MFU is exactly 1 for it, and a faster step later raises it again
// without another measurement or another line.
TEST(MfuMeter, AStepStillFasterThanTheRemeasuredPeakIsThePeak) {
  Meter m;
  MfuMeter meter = m.make(1e10, [] { return 2e10; });
  EXPECT_EQ(meter.mfu(5e9), 0.5);
  EXPECT_EQ(m.remeasures, 0);
  EXPECT_EQ(meter.mfu(3e10), 1.0);
  EXPECT_EQ(meter.peak().flops, 3e10);
  EXPECT_EQ(meter.peak().source.rfind("the fastest training step of this run", 0), 0u) << meter.peak().source;
  EXPECT_NE(meter.peak().source.find("0.02 TFLOP/s (measured again)"), std::string::npos) << meter.peak().source;
  ASSERT_EQ(m.lines.size(), 1u);
  EXPECT_NE(m.lines[0].find("the step's rate is the peak"), std::string::npos) << m.lines[0];
  EXPECT_EQ(meter.mfu(1.5e10), 0.5);
  EXPECT_EQ(meter.mfu(6e10), 1.0);
  EXPECT_EQ(meter.peak().flops, 6e10);
  EXPECT_EQ(m.remeasures, 1);
  EXPECT_EQ(m.lines.size(), 1u);
  EXPECT_TRUE(meter.raised());
}

// A stated figure (--peak-tflops) is not measured again: a step beyond it is the peak, said once.
TEST(MfuMeter, AStatedPeakBelowAStepGivesWayToTheStep) {
  Meter m;
  MfuMeter meter = m.make(1e9, nullptr);
  EXPECT_EQ(meter.mfu(4e9), 1.0);
  EXPECT_EQ(meter.peak().flops, 4e9);
  EXPECT_EQ(m.lines.size(), 1u);
  EXPECT_EQ(m.remeasures, 0);
}

TEST(MfuMeter, BadRatesAndPeaksAreErrors) {
  Meter m;
  MfuMeter meter = m.make(1e9, nullptr);
  EXPECT_THROW(meter.mfu(NAN), Error);
  EXPECT_THROW(meter.mfu(INFINITY), Error);
  EXPECT_THROW(meter.mfu(-1), Error);
  EXPECT_THROW(m.make(0, nullptr), Error);
  EXPECT_THROW(MfuMeter().mfu(1), Error);
  EXPECT_TRUE(m.lines.empty());
}

// The trainer's steps go through the rule: against a stated peak of 1 FLOP/s every step is faster, the first
// one's rate becomes the peak (MFU exactly 1), and no step's MFU is above 1.
TEST(MfuMeter, TheTrainersStepsNeverReadAbove1) {
  const std::string dir = scratch_dir();
  auto comm = make_single_communicator();
  TrainOptions o = tiny_train_options(dir);
  o.steps = 4;
  o.peak_tflops = 1e-12;
  Trainer t(o, *comm);
  const StepStats first = t.step();
  EXPECT_EQ(first.mfu, 1.0);
  EXPECT_EQ(t.peak_flops(), first.tokens_per_s * t.flops_per_token());  // one rank
  EXPECT_EQ(t.peak().source.rfind("the fastest training step of this run", 0), 0u) << t.peak().source;
  double fastest = t.peak_flops();
  for (int i = 0; i < 3; i++) {
    const StepStats s = t.step();
    EXPECT_LE(s.mfu, 1.0);
    EXPECT_GT(s.mfu, 0.0);
    fastest = std::max(fastest, s.tokens_per_s * t.flops_per_token());
  }
  EXPECT_EQ(t.peak_flops(), fastest);
}

}  // namespace
}  // namespace gpt::test
