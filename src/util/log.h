// Console output helpers: rank-0 logging (so N ranks print one line, not N) and a monotonic clock.
#pragma once
#include <chrono>
#include <cstdio>
#include <string>

#include "src/core/check.h"
#include "src/dist/communicator.h"

namespace gpt {

inline double now_seconds() {
  using namespace std::chrono;
  return duration<double>(steady_clock::now().time_since_epoch()).count();
}

template <typename... Args>
void log_rank0(Communicator& comm, const Args&... args) {
  if (comm.rank() != 0) return;
  std::string s = str(args...);
  std::fprintf(stdout, "%s\n", s.c_str());
  std::fflush(stdout);
}

}  // namespace gpt
