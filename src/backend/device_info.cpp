// See device_info.h: the names of the device kinds and the wording of the driver-memory report.
#include "src/backend/device_info.h"

#include <fstream>

#include "src/core/check.h"

namespace gpt {

const char* device_kind_name(DeviceKind kind) { return kind == DeviceKind::cuda ? "cuda" : "cpu"; }

std::string cpu_model_name() {
  std::ifstream f("/proc/cpuinfo");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("model name", 0) == 0) {
      const size_t c = line.find(':');
      const size_t v = c == std::string::npos ? c : line.find_first_not_of(" \t", c + 1);
      return v == std::string::npos ? "" : line.substr(v);
    }
  return "";
}

namespace {
double mib(int64_t b) { return b / 1048576.0; }
}  // namespace

std::vector<std::string> DriverMemory::lines(int rank, bool comm_buffers) const {
  const int64_t difference = driver_bytes - ledger_bytes;
  std::vector<std::string> out;
  out.push_back(str("rank ", rank, " device memory: ledger ", mib(ledger_bytes), " MiB (workspace ", mib(workspace_bytes),
                    " MiB) | driver (", driver_query, ", since backend start) ", mib(driver_bytes), " MiB | difference ",
                    mib(difference), " MiB", comm_buffers ? " (includes NCCL's buffers)" : ""));
  if (!comm_buffers && difference > explained_bytes)
    out.push_back(str("warning: rank ", rank, ": the driver counts ", mib(difference), " MiB more than the ledger, beyond the ",
                      mib(explained_bytes),
                      " MiB that allocation rounding and kernel code explain: memory outside the ledger (library "
                      "buffers or another process on this GPU)"));
  return out;
}

}  // namespace gpt
