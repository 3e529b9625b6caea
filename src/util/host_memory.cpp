// See host_memory.h.
#include "src/util/host_memory.h"

#include <sys/resource.h>

#include <algorithm>
#include <fstream>
#include <sstream>
#include <vector>

namespace gpt {
namespace {

constexpr int64_t kNone = INT64_MAX;

// The first whitespace-separated number of a file ("max" and unreadable files give kNone).
int64_t read_number(const std::string& path) {
  std::ifstream in(path);
  std::string word;
  if (!(in >> word) || word == "max") return kNone;
  try {
    return std::stoll(word);
  } catch (...) {
    return kNone;
  }
}

// "key value" lines (memory.stat, /proc/meminfo, /proc/self/status): the value of `key`, or -1.
int64_t read_keyed(const std::string& path, const std::string& key) {
  std::ifstream in(path);
  std::string k;
  int64_t v = 0;
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream ls(line);
    if (ls >> k >> v && (k == key || k == key + ":")) return v;
  }
  return -1;
}

int64_t headroom(int64_t limit, int64_t usage, int64_t reclaimable) {
  if (limit == kNone || limit >= (int64_t{1} << 62) || usage == kNone) return kNone;
  const int64_t used = usage - std::max<int64_t>(reclaimable, 0);
  return std::max<int64_t>(limit - std::max<int64_t>(used, 0), 0);
}

struct Mount {
  std::string root, point;  // the hierarchy path mounted, and where
};

// The mount of the cgroup v2 hierarchy (v2 = true) or of the v1 hierarchy with the memory controller.
bool find_cgroup_mount(bool v2, Mount& m) {
  std::ifstream in("/proc/self/mountinfo");
  std::string line;
  while (std::getline(in, line)) {
    const size_t dash = line.find(" - ");
    if (dash == std::string::npos) continue;
    std::istringstream head(line.substr(0, dash)), tail(line.substr(dash + 3));
    std::string id, parent, dev, root, point, fstype, source, opts;
    if (!(head >> id >> parent >> dev >> root >> point) || !(tail >> fstype >> source >> opts)) continue;
    const bool match = v2 ? fstype == "cgroup2" : fstype == "cgroup" && ("," + opts + ",").find(",memory,") != std::string::npos;
    if (match) {
      m = {root, point};
      return true;
    }
  }
  return false;
}

// This process's cgroup path in the v2 hierarchy ("0::/path") or the v1 memory hierarchy ("N:...memory...:/path").
bool own_cgroup_path(bool v2, std::string& path) {
  std::ifstream in("/proc/self/cgroup");
  std::string line;
  while (std::getline(in, line)) {
    const size_t a = line.find(':'), b = line.find(':', a + 1);
    if (a == std::string::npos || b == std::string::npos) continue;
    const std::string ctrl = line.substr(a + 1, b - a - 1);
    const bool match = v2 ? ctrl.empty() : ("," + ctrl + ",").find(",memory,") != std::string::npos;
    if (match) {
      path = line.substr(b + 1);
      return true;
    }
  }
  return false;
}

// The smallest headroom over this process's cgroup and its ancestors within the mount.
int64_t cgroup_headroom(bool v2) {
  Mount m;
  std::string path;
  if (!find_cgroup_mount(v2, m) || !own_cgroup_path(v2, path)) return kNone;
  if (m.root != "/" && path.rfind(m.root, 0) == 0) path = path.substr(m.root.size());
  std::string dir = m.point + (path == "/" ? "" : path);
  int64_t best = kNone;
  for (;;) {
    best = std::min(best, v2 ? cgroup_v2_headroom(dir) : cgroup_v1_headroom(dir));
    if (dir.size() <= m.point.size()) break;
    dir = dir.substr(0, dir.find_last_of('/'));
  }
  return best;
}

}  // namespace

int64_t cgroup_v2_headroom(const std::string& dir) {
  return headroom(read_number(dir + "/memory.max"), read_number(dir + "/memory.current"),
                  read_keyed(dir + "/memory.stat", "inactive_file"));
}

int64_t cgroup_v1_headroom(const std::string& dir) {
  int64_t inactive = read_keyed(dir + "/memory.stat", "total_inactive_file");
  if (inactive < 0) inactive = read_keyed(dir + "/memory.stat", "inactive_file");
  return headroom(read_number(dir + "/memory.limit_in_bytes"), read_number(dir + "/memory.usage_in_bytes"), inactive);
}

HostMemory host_memory_available() {
  HostMemory h;
  auto consider = [&](int64_t bytes, const char* source) {
    if (bytes < h.available) {
      h.available = bytes;
      h.source = source;
    }
  };
  const int64_t avail_kb = read_keyed("/proc/meminfo", "MemAvailable");
  if (avail_kb >= 0) consider(avail_kb * 1024, "MemAvailable in /proc/meminfo");
  consider(cgroup_headroom(true), "the cgroup v2 memory.max");
  consider(cgroup_headroom(false), "the cgroup memory.limit_in_bytes");
  struct rlimit rl;
  if (getrlimit(RLIMIT_AS, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY) {
    const int64_t vm_kb = read_keyed("/proc/self/status", "VmSize");
    consider(std::max<int64_t>((int64_t)rl.rlim_cur - std::max<int64_t>(vm_kb, 0) * 1024, 0),
             "the address-space limit (ulimit -v) less this process's size");
  }
  return h;
}

}  // namespace gpt
