// A product's shape in the time model (src/plan/gemm_shape.h): the factor against its closed form and 1 on
// the calibration's own shapes, the edge's fit recovering the edge that made its samples, and a hardware
// file's gemm_edge / gemm_backward_edge pricing the ops, surviving the round trip and refused when negative.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "src/cli/plan_auto.h"
#include "src/core/check.h"
#include "src/plan/gemm_shape.h"
#include "src/plan/hardware.h"
#include "src/plan/op_costs.h"
#include "src/plan/rank_rates.h"

namespace gpt::test {
namespace {

double ends(double m, double n, double k, double e) { return (1 + e / m) * (1 + e / n) * (1 + e / k); }

TEST(GemmShape, FactorIsOneOnTheCalibrationShapesAndTheClosedFormElsewhere) {
  for (double mnk = 1e4; mnk < 1e11; mnk *= 3.7) {
    const GemmShape f = calibration_gemm_shape(mnk);
    EXPECT_LT(std::fabs(std::log(f.mnk() / mnk)), std::log(1.5)) << mnk;  // sides rounded to multiples of 8 or 16
    EXPECT_DOUBLE_EQ(gemm_shape_factor(f.m, f.n, f.k, 24), 1.0) << f.m << " " << f.n << " " << f.k;
  }
  // the d2 classifier (256 tokens, C = 128, 50304 outputs) against the curve's shape at its M*N*K,
  // 256 x 2544 x 2544 (sqrt(256 * 50304 * 128 / 256) = 2537.4, rounded to a multiple of 16)
  EXPECT_EQ(calibration_gemm_shape(256.0 * 50304 * 128).n, 2544);
  EXPECT_DOUBLE_EQ(gemm_shape_factor(256, 50304, 128, 24), ends(256, 50304, 128, 24) / ends(256, 2544, 2544, 24));
  EXPECT_GT(gemm_shape_factor(256, 50304, 128, 24), 1.15);
  // no edge, or a side unknown: M*N*K alone
  EXPECT_EQ(gemm_shape_factor(256, 50304, 128, 0), 1.0);
  EXPECT_EQ(gemm_shape_factor(0, 50304, 128, 24), 1.0);
  // a wider product than the curve's shape runs faster than the curve
  EXPECT_LT(gemm_shape_factor(2048, 2048, 2048, 24), 1.0);
}

// Samples made with a known edge per call: the fit gives each call its own, exactly (the search's step is
// 1/4), and one disturbed sample does not move it.
TEST(GemmShape, FitRecoversTheEdgeThatMadeTheSamples) {
  std::vector<GemmSample> s;
  const std::vector<GemmShape> shapes = {{32, 1024, 1024}, {1024, 32, 1024}, {1024, 1024, 128}, {256, 32768, 128}};
  for (const GemmShape& sh : shapes) {
    const double ref = 1e-3;
    s.push_back({sh, false, ref * gemm_shape_factor(sh.m, sh.n, sh.k, 20.5), ref});
    s.push_back({sh, true, ref * gemm_shape_factor(sh.m, sh.n, sh.k, 31.25), ref});
  }
  EXPECT_DOUBLE_EQ(fit_gemm_edge(s, false), 20.5);
  EXPECT_DOUBLE_EQ(fit_gemm_edge(s, true), 31.25);
  // one pair a busy moment slowed by half: the fit (least absolute deviations) keeps the edge of the others
  std::vector<GemmSample> disturbed = s;
  disturbed[0].seconds *= 1.5;
  EXPECT_DOUBLE_EQ(fit_gemm_edge(disturbed, false), 20.5);
  // products no slower than their references: no edge
  for (GemmSample& g : s) g.seconds = 0.9 * g.reference_seconds;
  EXPECT_EQ(fit_gemm_edge(s, false), 0.0);
  EXPECT_EQ(fit_gemm_edge({}, true), 0.0);
}

std::string cpu_file(const std::string& edges) {
  return R"({"name": "test cpu", "kind": "cpu", "dtype": "fp32", "peak_flops": 1e11, "cores": 2,
    "profiles": [{"ranks": 1, "threads": 2, "gemm": [[1e4, 1e10], [1e8, 8e10]], "gemm_backward": 6e10, )" +
         edges + R"( "stream": 1e10}],
    "network": {"overlap": false, "intra": {"bandwidth": 2e9, "latency_s": 2e-5}}})";
}

RankRates rates(const HardwareSpec& hw) {
  std::string describe;
  std::vector<std::string> notes;
  return rates_for(hw, 1, 2, &describe, &notes);
}

// The classifier's product, forward and backward, priced on the curves times each call's factor.
TEST(GemmShape, HardwareEdgesPriceTheProducts) {
  const HardwareSpec plain = parse_hardware(cpu_file(""), "plain.json");
  const HardwareSpec edged = parse_hardware(cpu_file(R"("gemm_edge": 20, "gemm_backward_edge": 30,)"), "edged.json");
  OpTarget t;
  const int N = 256, C = 128, OC = 50304;
  const OpCosts fwd = op_cost::matmul_forward(t, N, C, OC), bwd = op_cost::matmul_backward(t, N, C, OC, false);
  const double mnk = (double)N * C * OC;
  EXPECT_DOUBLE_EQ(rates(plain).seconds(fwd), 2 * mnk / 8e10);
  EXPECT_DOUBLE_EQ(rates(plain).seconds(bwd), 4 * mnk / 6e10);
  EXPECT_DOUBLE_EQ(rates(edged).seconds(fwd), 2 * mnk / 8e10 * gemm_shape_factor(N, OC, C, 20));
  EXPECT_DOUBLE_EQ(rates(edged).seconds(bwd), 4 * mnk / 6e10 * gemm_shape_factor(N, OC, C, 30));
  // the backward edge defaults to the forward's; both survive the round trip
  const HardwareSpec one = parse_hardware(cpu_file(R"("gemm_edge": 20,)"), "one.json");
  EXPECT_DOUBLE_EQ(one.profiles[0].gemm_backward_edge, 20);
  const HardwareSpec again = parse_hardware(hardware_to_json(edged), "again.json");
  EXPECT_DOUBLE_EQ(again.profiles[0].gemm_edge, 20);
  EXPECT_DOUBLE_EQ(again.profiles[0].gemm_backward_edge, 30);
  EXPECT_EQ(parse_hardware(hardware_to_json(plain), "again.json").profiles[0].gemm_edge, 0);
}

// --plan auto's cached calibration: a profile made before the edge was fitted is measured again (else the
// plan would price by M*N*K alone without a word); an edge of 0 that a calibration fitted still serves.
TEST(GemmShape, ACachedCalibrationWithoutTheEdgeIsMeasuredAgain) {
  EXPECT_FALSE(calibration_serves(parse_hardware(cpu_file(""), "old.json"), 1, 2));
  EXPECT_TRUE(calibration_serves(parse_hardware(cpu_file(R"("gemm_edge": 20,)"), "new.json"), 1, 2));
  const HardwareSpec zero = parse_hardware(cpu_file(R"("gemm_edge": 0,)"), "zero.json");
  EXPECT_TRUE(calibration_serves(zero, 1, 2));
  EXPECT_TRUE(calibration_serves(parse_hardware(hardware_to_json(zero), "again.json"), 1, 2));  // written back
  EXPECT_FALSE(calibration_serves(zero, 2, 1));  // no profile for 2 ranks x 1 thread
}

TEST(GemmShape, NegativeOrTextEdgeIsAOneLineErrorNamingTheField) {
  for (const char* bad : {R"("gemm_edge": -1,)", R"("gemm_backward_edge": "wide",)"}) {
    try {
      parse_hardware(cpu_file(bad), "bad.json");
      ADD_FAILURE() << "accepted " << bad;
    } catch (const Error& e) {
      const std::string msg = e.what();
      EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
      EXPECT_EQ(msg.rfind("bad.json: field profiles[0].gemm", 0), 0u) << msg;
    }
  }
}

}  // namespace
}  // namespace gpt::test
