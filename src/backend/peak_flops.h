// The peaks MFU is measured against, one rule per kind of device:
//  - cpu: what this machine's CPU actually reaches in an fp32 sgemm with OpenBLAS, measured in short bursts
//    spread over the first second (a stated, measured peak rather than a datasheet number); a calibration
//    cached by `gpt bench --calibrate` replaces it (src/runtime/peak_cache.h), and a step that runs faster
//    than the peak has it re-measured (src/runtime/mfu_meter.h);
//  - cuda: the GPU's dense bf16 tensor-core peak, named from what the CUDA runtime reports about it
//    (compute capability, SM count, clock, name): the datasheet figure for the parts in the table, else
//    SMs x clock x the architecture's dense bf16 FLOP per clock per SM.
// The GPU rule takes plain data (no CUDA headers), so it is tested on machines without a GPU; the cuda
// backend fills GpuFacts from its device.
#pragma once
#include <functional>
#include <string>

#include "src/backend/device_info.h"

namespace gpt {

// The CPU's peak: the best rate of a 768^3 fp32 sgemm over bursts of a few products spread in time by
// pauses that double (the rule, and why it defeats a slow instant of the host, is in peak_flops.cpp).
struct PeakSchedule {
  int bursts = 0;          // how many bursts
  double first_gap_s = 0;  // the pause before the second burst; each later pause doubles
  double burst_s = 0;      // a burst times products until this long has passed (at least 2, at most 8)
};
// Pauses 10, 20, ..., 320 ms: the bursts span ~0.8 s on a quiet host (slow products stretch it).
constexpr PeakSchedule kStartupPeak{7, 0.01, 0.02};
// After a step ran faster than the peak (src/runtime/mfu_meter.h): pauses up to 1.28 s, a ~2.8 s span.
constexpr PeakSchedule kRemeasurePeak{9, 0.01, 0.02};
// gpt bench --calibrate, whose result is cached (src/runtime/peak_cache.h): pauses up to 2.56 s, ~5.7 s.
constexpr PeakSchedule kCalibratePeak{10, 0.01, 0.05};

// What the measurement reads, runs and waits on: the real one times OpenBLAS on steady_clock and sleeps;
// tests stage a host that is slow at chosen instants.
struct PeakProbe {
  std::function<double()> now;        // seconds, monotonic
  std::function<void(double)> pause;  // wait this many seconds, leaving the cores to others
  std::function<void()> product;      // one product of flop_per_product FLOPs
  double flop_per_product = 0;
};
PeakProbe sgemm_probe();  // 768^3 sgemm (2 * 768^3 FLOPs) with OpenBLAS's threads

struct BurstPeak {
  double flops = 0;   // the best burst's rate
  int bursts = 0;     // bursts run
  double span_s = 0;  // from the first burst's start to the last one's end
};
BurstPeak measure_burst_peak(const PeakSchedule& schedule, const PeakProbe& probe);

// The rate a CPU backend with this process's OpenBLAS threads is rated at, and what it depends on: a
// calibration is valid for the same CPU model, thread count and OpenBLAS kernels (OPENBLAS_CORETYPE, or
// what OpenBLAS picked for the CPU, and its version) and no other.
struct CpuPeakKey {
  std::string cpu;   // cpu_model_name(), or "CPU" where /proc/cpuinfo names none
  int threads = 0;   // OpenBLAS's threads
  std::string blas;  // cpu_blas_name()
  bool operator==(const CpuPeakKey& o) const { return cpu == o.cpu && threads == o.threads && blas == o.blas; }
};
CpuPeakKey this_cpu_peak_key();
// "this CPU's measured fp32 sgemm (MODEL, BLAS, N threads), best of B bursts over S s" (+ `extra`).
std::string cpu_peak_source(const CpuPeakKey& key, int bursts, double span_s, const std::string& extra = "");
// measure_burst_peak of the real sgemm, with its source.
PeakFlops measure_cpu_peak_flops(const PeakSchedule& schedule = kStartupPeak);
// The BLAS the CPU backend runs on and the kernels it picked for this CPU, e.g. "OpenBLAS 0.3.21, SkylakeX
// kernels" (OpenBLAS chooses them at run time, so a number measured on the CPU needs this beside it).
std::string cpu_blas_name();

// What the CUDA runtime says about one GPU.
struct GpuFacts {
  std::string name;          // cudaDeviceProp::name, e.g. "NVIDIA H200"
  int major = 0, minor = 0;  // compute capability
  int sms = 0;               // cudaDevAttrMultiProcessorCount
  int clock_khz = 0;         // cudaDevAttrClockRate: the maximum (boost) SM clock, in kHz
};
PeakFlops gpu_bf16_peak_flops(const GpuFacts& gpu);

}  // namespace gpt
