// Crash-safe writes and small file helpers (see atomic_file.h). A checkpoint or a model file is written to a
// temp file next to the target, flushed to the disk, and renamed over the target; the rename is atomic on
// POSIX file systems, and the directory fsync makes the rename itself durable.
#include "src/io/atomic_file.h"

#include <fcntl.h>
#include <glob.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "src/core/check.h"

namespace gpt {

namespace {

std::string parent_dir(const std::string& path) {
  size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

// Makes the rename durable; failure here is not fatal for correctness of the content, so only a clean
// error when the directory can't be opened at all.
void fsync_dir(const std::string& dir) {
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY);
  GPT_CHECK(fd >= 0, "cannot open directory ", dir, " to sync it: ", std::strerror(errno));
  ::fsync(fd);
  ::close(fd);
}

// 256-entry table for the reflected IEEE polynomial 0xEDB88320.
struct CrcTable {
  uint32_t t[256];
  CrcTable() {
    for (uint32_t i = 0; i < 256; i++) {
      uint32_t c = i;
      for (int k = 0; k < 8; k++) c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
      t[i] = c;
    }
  }
};

}  // namespace

uint32_t crc32_update(uint32_t crc, const void* data, size_t bytes) {
  static const CrcTable table;
  const unsigned char* p = static_cast<const unsigned char*>(data);
  uint32_t c = crc ^ 0xFFFFFFFFu;
  for (size_t i = 0; i < bytes; i++) c = table.t[(c ^ p[i]) & 0xFFu] ^ (c >> 8);
  return c ^ 0xFFFFFFFFu;
}

AtomicWriter::AtomicWriter(const std::string& path)
    : path_(path), tmp_(path + ".tmp." + std::to_string(::getpid())) {
  f_ = std::fopen(tmp_.c_str(), "wb");
  GPT_CHECK(f_ != nullptr, "cannot create ", tmp_, " (for ", path, "): ", std::strerror(errno));
}

AtomicWriter::~AtomicWriter() {
  if (f_) {
    std::fclose(f_);
    std::remove(tmp_.c_str());
  }
}

// Fault injection for tests: GPT_TEST_WRITE_FAIL="ENOSPC:part" (or EIO) makes every write to a file whose
// path contains `part` fail with that error, as a full disk or a failing device would.
static int injected_write_error(const std::string& path) {
  static const char* env = std::getenv("GPT_TEST_WRITE_FAIL");
  if (!env) return 0;
  const std::string spec = env;
  const size_t colon = spec.find(':');
  if (colon == std::string::npos || path.find(spec.substr(colon + 1)) == std::string::npos) return 0;
  const std::string name = spec.substr(0, colon);
  return name == "ENOSPC" ? ENOSPC : name == "EIO" ? EIO : 0;
}

void AtomicWriter::write(const void* data, size_t bytes) {
  GPT_CHECK(f_ != nullptr, "write to ", path_, " after commit");
  if (bytes == 0) return;
  errno = injected_write_error(tmp_);
  const size_t n = errno ? 0 : std::fwrite(data, 1, bytes, f_);
  GPT_CHECK(n == bytes, "cannot write ", tmp_, ": wrote ", n, " of ", bytes, " bytes: ",
            errno ? std::strerror(errno) : "short write");
  written_ += bytes;
  crc_ = crc32_update(crc_, data, bytes);
}

void AtomicWriter::commit() {
  GPT_CHECK(f_ != nullptr, "commit of ", path_, " called twice");
  bool ok = std::fflush(f_) == 0 && ::fsync(::fileno(f_)) == 0;
  int err = errno;
  ok = (std::fclose(f_) == 0) && ok;
  f_ = nullptr;
  if (!ok) {
    std::remove(tmp_.c_str());
    fail("cannot flush ", tmp_, " to disk: ", std::strerror(err));
  }
  if (std::rename(tmp_.c_str(), path_.c_str()) != 0) {
    err = errno;
    std::remove(tmp_.c_str());
    fail("cannot rename ", tmp_, " to ", path_, ": ", std::strerror(err));
  }
  fsync_dir(parent_dir(path_));
}

void write_file_atomic(const std::string& path, const void* data, size_t bytes) {
  AtomicWriter w(path);
  w.write(data, bytes);
  w.commit();
}

void check_writable(const std::string& flag, const std::string& path) {
  FILE* f = std::fopen(path.c_str(), "a");
  GPT_CHECK(f != nullptr, flag, " ", path, ": cannot be written (", std::strerror(errno), ")");
  std::fclose(f);
}

std::string read_file(const std::string& path) {
  FILE* f = std::fopen(path.c_str(), "rb");
  GPT_CHECK(f != nullptr, "cannot open ", path, ": ", std::strerror(errno));
  std::string out;
  char buf[1 << 16];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) out.append(buf, n);
  bool bad = std::ferror(f) != 0;
  std::fclose(f);
  GPT_CHECK(!bad, "error while reading ", path);
  return out;
}

std::vector<std::string> glob_matches(const std::string& pattern, const std::string& flag_name) {
  GPT_CHECK(!pattern.empty(), flag_name, ": empty file pattern");
  glob_t g;
  std::memset(&g, 0, sizeof g);
  int rc = ::glob(pattern.c_str(), 0, nullptr, &g);
  std::vector<std::string> files;
  if (rc == 0)
    for (size_t i = 0; i < g.gl_pathc; i++) files.emplace_back(g.gl_pathv[i]);
  ::globfree(&g);
  GPT_CHECK(rc != GLOB_NOSPACE && rc != GLOB_ABORTED, flag_name, ": cannot read the files of pattern '",
            pattern, "'");
  std::sort(files.begin(), files.end());
  return files;
}

std::vector<std::string> glob_files(const std::string& pattern, const std::string& flag_name) {
  std::vector<std::string> files = glob_matches(pattern, flag_name);
  GPT_CHECK(!files.empty(), flag_name, ": no file matches '", pattern, "'");
  return files;
}

}  // namespace gpt
