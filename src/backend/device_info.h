// What a backend says about its device, beside the ops: which kind of device it is, the peak FLOP/s that
// MFU is measured against, and its memory as the driver counts it. A backend answers through DeviceInfo
// (Backend::device_info), a small interface beside the compute one, so that measurement concerns stay out
// of the ops; the layers above (runtime, train) decide and report by these instead of testing backend names
// or build flags.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace gpt {

// The kinds of device a backend runs on. Code above the backend asks kind(), never the name.
enum class DeviceKind { cpu, cuda };
const char* device_kind_name(DeviceKind kind);  // "cpu" | "cuda"

// The CPU's model name from /proc/cpuinfo ("model name"), or "" where that file has none; names the machine
// in hardware files and beside measured peaks, so that a number says where it was measured.
std::string cpu_model_name();

// The peak FLOP/s of one rank's device in the backend's compute dtype (the denominator of MFU), and where
// the figure comes from, for the start-up report (src/backend/peak_flops.h has the rules).
struct PeakFlops {
  double flops = 0;
  std::string source;  // e.g. "this CPU's measured fp32 sgemm"
};

// One rank's device memory as the ledger counts it, set against the driver's own count, for the start-up
// report. Figures (not text) so that every rank's can be collected on rank 0 with scalar reductions; lines()
// words them. Backends with no driver to ask (cpu) have none (Backend::driver_memory is empty).
struct DriverMemory {
  std::string driver_query;     // how the driver was asked, e.g. "cudaMemGetInfo"
  int64_t ledger_bytes = 0;     // the ledger's device total
  int64_t workspace_bytes = 0;  // of it, tagged workspace
  int64_t driver_bytes = 0;     // device bytes the driver counts in use now minus at backend construction
  int64_t explained_bytes = 0;  // what the ledger cannot see but expects: allocation rounding, kernel code
  // The report for `rank`: one line, and a warning line when the driver counts more than explained_bytes
  // beyond the ledger. comm_buffers: a device communicator (NCCL) holds buffers the driver counts too, so
  // only the difference is shown, without the warning.
  std::vector<std::string> lines(int rank, bool comm_buffers) const;
};

// A backend's device, as the run's reports and checks measure it.
class DeviceInfo {
 public:
  virtual ~DeviceInfo() = default;
  // The device's peak FLOP/s for MFU: cpu measures an sgemm in bursts spread over ~0.8 s (once, on the first
  // call), cuda names the GPU's dense bf16 peak (src/backend/peak_flops.h).
  virtual PeakFlops peak_flops() const = 0;
  // A fresh measurement of the peak, taken when a step ran faster than it (src/runtime/mfu_meter.h); cpu
  // measures again over a longer span and keeps the better of the two for peak_flops(). A named figure
  // (cuda's datasheet peak) has nothing to measure: the default returns peak_flops().
  virtual PeakFlops remeasure_peak_flops() { return peak_flops(); }
  // The ledger's device total against the driver's count (cuda); empty where there is no driver (cpu).
  virtual std::optional<DriverMemory> driver_memory() const { return std::nullopt; }
  // Bytes the device can still give (cudaMemGetInfo's free on cuda); -1 where the device domain is host
  // memory (cpu), for the pre-flight check.
  virtual int64_t device_memory_free() const { return -1; }
};

}  // namespace gpt
