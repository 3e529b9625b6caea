// One run per run directory: `gpt train --out DIR` holds an advisory lock on DIR/.lock (flock) for as long
// as the process lives, with the holder's pid, host and start time written in the file. A second run with
// the same --out is refused at once with a message naming the holder. The kernel drops the lock when the
// process ends in any way (kill -9 included), so no stale lock is ever left to clean up by hand.
#pragma once
#include <string>

namespace gpt {

class RunLock {
 public:
  // Takes the lock or throws gpt::Error naming the directory and the holder.
  explicit RunLock(const std::string& dir);
  ~RunLock();
  RunLock(const RunLock&) = delete;
  RunLock& operator=(const RunLock&) = delete;

 private:
  int fd_ = -1;
};

}  // namespace gpt
