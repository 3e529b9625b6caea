// See peak_flops.h. The CPU rule first, then the GPU figures.
//
// The CPU: why bursts spread in time. A disturbance of the host (another process on the cores, a
// hypervisor taking the CPU, a clock that has not ramped up, page faults) only ever slows a product down:
// nothing makes sgemm faster than the hardware, so the fastest timing is the least disturbed one and the
// maximum is the estimator to take. But the maximum of timings all made inside one short window is
// decided by that window: one slow instant of a quarter second covering it rated a shared 2-core host six
// times low, and every MFU of the run with it. So the timings are spread out:
//  - bursts of a few products, separated by pauses that double (10, 20, 40, ... ms). A slowdown decides the
//    peak only if it covers every burst, that is, lasts the whole span (on a quiet host ~0.8 s at start-up,
//    ~2.8 s when re-measuring, ~5.7 s calibrating; slow products stretch it); any shorter one leaves a burst
//    outside it, and that burst's rate wins. Doubling pauses buy that span with few bursts (a few products
//    each; a pause costs wall time, not CPU) and keep the first bursts close, so a quiet machine is sampled
//    densely as well;
//  - the pauses sleep, not spin: the cores go to whatever competes, so a competing burst of work ends
//    sooner instead of being stretched by ours;
//  - in each burst the first product is not timed (it wakes OpenBLAS's threads, parked during the pause, and
//    warms the caches); a burst's rate is its best timed product; the peak is the best burst's rate.
// What this cannot defeat is a slowdown lasting the whole span: against that stand the calibration that
// `gpt bench --calibrate` caches (measured on purpose, over the longest span) and the rule that a step
// running faster than the peak has it re-measured (src/runtime/mfu_meter.h).
//
// The GPU figures, and where they come from:
//
// Dense bf16 FLOP per clock per SM, by compute capability (tensor cores, fp32 accumulation; NVIDIA's
// architecture whitepapers give them per SM, and each matches its datasheet peak below):
//   sm_80 (A100)          2048   108 SMs x 1.41 GHz x 2048 = 312 TFLOP/s
//   sm_86, sm_89          1024   A10: 72 SMs x 1.695 GHz x 1024 = 125; L40S: 142 x 2.52 GHz x 1024 = 366
//                                (datasheet 362); GeForce parts accumulate fp32 at half this rate
//   sm_90 (H100, H200)    4096   132 SMs x 1.83 GHz x 4096 = 989.4 TFLOP/s
// A capability not listed takes the rate of the newest listed one not newer than it (and says so).
//
// Datasheet peaks, used as they are for the parts they name (NVIDIA's "BF16 Tensor Core" figure is given
// with 2:4 sparsity; dense is half of it), keyed by compute capability and SM count:
//   sm_90, 132 SMs  H100 SXM5, H200 SXM, GH200   1979 / 2 = 989.4e12
//   sm_90, 114 SMs  H100 PCIe                    1513 / 2 = 756.5e12
//   sm_80, 108 SMs  A100 (SXM4 and PCIe)          624 / 2 = 312e12
// Why a table before the formula: Hopper's tensor-core peak is specified at 1.83 GHz, while the clock the
// driver reports (cudaDevAttrClockRate) is the 1.98 GHz maximum boost, so SMs x reported clock x 4096 would
// put an H100 SXM at 1070 TFLOP/s, not the 989 that papers and other trainers measure MFU against. The
// formula is the fallback for other parts: it uses the maximum clock, so it errs high (MFU errs low).
// A part that shares a row's capability and SM count but runs slower (a power-capped variant) reads as
// the row: pass --peak-tflops then.
#include "src/backend/peak_flops.h"

#include <cblas.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <thread>
#include <vector>

#include "src/core/check.h"

namespace gpt {

namespace {

constexpr int kSgemmN = 768;
constexpr int kMaxTimedPerBurst = 8;

double seconds() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

std::string two_digits(double x) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f", x);
  return buf;
}

// One burst: an untimed product, then timed ones until burst_s has passed (at least 2); its best rate.
double burst_rate(const PeakSchedule& s, const PeakProbe& p) {
  p.product();
  double best = 0;
  const double start = p.now();
  for (int k = 0; k < kMaxTimedPerBurst && (k < 2 || p.now() - start < s.burst_s); k++) {
    const double t0 = p.now();
    p.product();
    const double dt = p.now() - t0;
    if (dt > 0) best = std::max(best, p.flop_per_product / dt);
  }
  return best;
}

}  // namespace

PeakProbe sgemm_probe() {
  const int n = kSgemmN;
  auto m = std::make_shared<std::vector<float>>((size_t)3 * n * n, 0.25f);  // a, b, c: (n, n) each
  PeakProbe p;
  p.now = seconds;
  p.pause = [](double s) { std::this_thread::sleep_for(std::chrono::duration<double>(s)); };
  p.product = [m, n] {
    float* a = m->data();
    float* b = a + (size_t)n * n;
    float* c = b + (size_t)n * n;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, n, n, 1.0f, a, n, b, n, 0.0f, c, n);
  };
  p.flop_per_product = 2.0 * n * n * n;
  return p;
}

BurstPeak measure_burst_peak(const PeakSchedule& s, const PeakProbe& p) {
  GPT_CHECK(s.bursts >= 1 && s.first_gap_s >= 0 && s.burst_s >= 0, "peak: bad burst schedule");
  BurstPeak r;
  const double start = p.now();
  double gap = s.first_gap_s;
  for (int b = 0; b < s.bursts; b++) {
    if (b > 0) {
      p.pause(gap);
      gap *= 2;
    }
    r.flops = std::max(r.flops, burst_rate(s, p));
    r.bursts++;
  }
  r.span_s = p.now() - start;
  GPT_CHECK(r.flops > 0, "peak: no sgemm could be timed (the clock did not advance); pass --peak-tflops");
  return r;
}

CpuPeakKey this_cpu_peak_key() {
  CpuPeakKey k;
  k.cpu = cpu_model_name();
  if (k.cpu.empty()) k.cpu = "CPU";
  k.threads = openblas_get_num_threads();
  k.blas = cpu_blas_name();
  return k;
}

std::string cpu_peak_source(const CpuPeakKey& key, int bursts, double span_s, const std::string& extra) {
  return str("this CPU's measured fp32 sgemm (", key.cpu, ", ", key.blas, ", ", key.threads, " threads), best of ",
             bursts, " bursts over ", two_digits(span_s), " s", extra);
}

PeakFlops measure_cpu_peak_flops(const PeakSchedule& schedule) {
  const BurstPeak b = measure_burst_peak(schedule, sgemm_probe());
  return {b.flops, cpu_peak_source(this_cpu_peak_key(), b.bursts, b.span_s)};
}

std::string cpu_blas_name() {
  // openblas_get_config() starts "OpenBLAS 0.3.21 ..." then build options; keep the name and version.
  std::string config = openblas_get_config();
  size_t sp = config.find(' ');
  sp = sp == std::string::npos ? sp : config.find(' ', sp + 1);
  return str(config.substr(0, sp), ", ", openblas_get_corename(), " kernels");
}

namespace {

struct ArchRate {
  int major, minor;
  double flop_per_clock_per_sm;  // dense bf16
};
constexpr ArchRate kArchRates[] = {{8, 0, 2048}, {8, 6, 1024}, {8, 9, 1024}, {9, 0, 4096}};  // oldest first

struct DatasheetPeak {
  int major, minor, sms;
  double flops;  // dense bf16
  const char* parts;
};
constexpr DatasheetPeak kDatasheet[] = {
    {9, 0, 132, 989.4e12, "H100/H200 SXM"},
    {9, 0, 114, 756.5e12, "H100 PCIe"},
    {8, 0, 108, 312e12, "A100"},
};

int capability(int major, int minor) { return major * 10 + minor; }

}  // namespace

PeakFlops gpu_bf16_peak_flops(const GpuFacts& gpu) {
  for (const DatasheetPeak& d : kDatasheet)
    if (d.major == gpu.major && d.minor == gpu.minor && d.sms == gpu.sms)
      return {d.flops, str(d.parts, " bf16 dense, datasheet; ", gpu.name)};
  GPT_CHECK(gpu.sms > 0 && gpu.clock_khz > 0, "cuda: ", gpu.name, " reports ", gpu.sms, " SMs at ", gpu.clock_khz,
            " kHz: cannot name its peak (pass --peak-tflops)");
  const int cc = capability(gpu.major, gpu.minor);
  const ArchRate* rate = nullptr;
  for (const ArchRate& r : kArchRates)
    if (capability(r.major, r.minor) <= cc) rate = &r;
  GPT_CHECK(rate, "cuda: ", gpu.name, " (sm_", cc, ") has no bf16 tensor cores this trainer knows (sm_80 or newer)");
  const double ghz = gpu.clock_khz / 1e6;
  std::string source = str(gpu.name, ": ", gpu.sms, " SMs x ", ghz, " GHz x ", rate->flop_per_clock_per_sm,
                           " bf16 FLOP/clock/SM");
  if (capability(rate->major, rate->minor) != cc)
    source += str(" (sm_", cc, " not in the table: sm_", capability(rate->major, rate->minor), "'s rate; pass --peak-tflops)");
  return {gpu.sms * (gpu.clock_khz * 1e3) * rate->flop_per_clock_per_sm, source};
}

}  // namespace gpt
