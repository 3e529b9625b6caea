// See peak_flops.h. The GPU figures, and where they come from:
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

#include <chrono>
#include <vector>

#include "src/core/check.h"

namespace gpt {

namespace {
double seconds() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }
}  // namespace

PeakFlops measure_cpu_peak_flops() {
  const int n = 768;
  std::vector<float> a((size_t)n * n, 0.5f), b((size_t)n * n, 0.25f), c((size_t)n * n, 0.0f);  // (n, n) each
  // Best of as many runs as fit in ~0.25 s (at least 4): the best run is the one least disturbed by other
  // processes. On a busy machine even that is low, and MFU then reads high: pass --peak-tflops instead.
  double best = 1e30;
  const double start = seconds();
  for (int rep = 0; rep < 4 || (rep < 200 && seconds() - start < 0.25); rep++) {
    double t0 = seconds();
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, n, n, 1.0f, a.data(), n, b.data(), n, 0.0f, c.data(), n);
    double dt = seconds() - t0;
    if (rep > 0 && dt < best) best = dt;  // first call warms up threads and caches
  }
  std::string model = cpu_model_name();
  if (model.empty()) model = "CPU";
  return {2.0 * n * n * n / best,
          str("this CPU's measured fp32 sgemm (", model, ", ", cpu_blas_name(), ", ", openblas_get_num_threads(), " threads)")};
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
