// See run_lock.h.
#include "src/io/run_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <ctime>

#include "src/core/check.h"

namespace gpt {

namespace {
std::string holder_of(int fd) {
  char buf[256] = {};
  const ssize_t n = ::pread(fd, buf, sizeof buf - 1, 0);
  std::string s = n > 0 ? std::string(buf, (size_t)n) : std::string("an unknown process");
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}
}  // namespace

RunLock::RunLock(const std::string& dir) {
  const std::string path = dir + "/.lock";
  fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  GPT_CHECK(fd_ >= 0, "--out ", dir, ": cannot open ", path, ": ", std::strerror(errno));
  if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    const std::string holder = holder_of(fd_);
    ::close(fd_);
    fd_ = -1;
    GPT_CHECK(err != EWOULDBLOCK, "--out ", dir, " is in use by another run (", holder,
              "); wait for it to end or choose another --out");
    fail("--out ", dir, ": cannot lock ", path, ": ", std::strerror(err));
  }
  char host[128] = {};
  ::gethostname(host, sizeof host - 1);
  const std::time_t t = std::time(nullptr);
  char when[64] = {};
  std::strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S", std::localtime(&t));
  const std::string me = str("pid ", ::getpid(), " on ", host, " since ", when, "\n");
  if (::ftruncate(fd_, 0) == 0) (void)::pwrite(fd_, me.data(), me.size(), 0);
}

RunLock::~RunLock() {
  if (fd_ >= 0) ::close(fd_);  // closing the descriptor drops the lock
}

}  // namespace gpt
