// How much host memory this process can still take, read from every limit that applies, before a run
// allocates: the kernel's MemAvailable, the memory cgroup (v2 memory.max, or v1 memory.limit_in_bytes, on
// this process's cgroup and every ancestor), and the address-space rlimit (ulimit -v). The smallest wins
// and is named, so a refusal can say which limit it met.
#pragma once
#include <cstdint>
#include <string>

namespace gpt {

struct HostMemory {
  int64_t available = INT64_MAX;  // bytes this process may still allocate
  std::string source = "no limit found";  // which limit gave `available` (for messages)
};

// Reads /proc/meminfo, /proc/self/cgroup with /proc/self/mountinfo, and getrlimit(RLIMIT_AS). A file that is
// missing or unreadable is skipped (not every machine has cgroups); never throws.
HostMemory host_memory_available();

// The pieces, for tests: the limit a cgroup v1 or v2 directory sets (limit minus usage, page cache that
// can be reclaimed not counted as used), or INT64_MAX when it sets none or cannot be read.
int64_t cgroup_v2_headroom(const std::string& dir);
int64_t cgroup_v1_headroom(const std::string& dir);

}  // namespace gpt
