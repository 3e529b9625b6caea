// Crash-safe file writes: data goes to "<path>.tmp.<pid>", is fsync'ed, renamed over <path>, and the
// directory is fsync'ed, so a reader sees either the old file or the complete new one, never a torn one.
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

namespace gpt {

class AtomicWriter {
 public:
  explicit AtomicWriter(const std::string& path);  // throws gpt::Error if the temp file can't be created
  ~AtomicWriter();                                  // without commit(): the temp file is removed
  AtomicWriter(const AtomicWriter&) = delete;
  AtomicWriter& operator=(const AtomicWriter&) = delete;
  void write(const void* data, size_t bytes);       // throws on a short write (disk full)
  uint64_t bytes_written() const { return written_; }
  uint32_t crc32() const { return crc_; }           // CRC-32 of everything written so far
  void commit();                                    // fsync, rename, fsync dir

 private:
  std::string path_, tmp_;
  FILE* f_ = nullptr;
  uint64_t written_ = 0;
  uint32_t crc_ = 0;
};

// Whole-buffer convenience.
void write_file_atomic(const std::string& path, const void* data, size_t bytes);
// Checks that path can be opened for appending (creating it when absent); throws gpt::Error naming the flag,
// the path and the reason otherwise (a missing or read-only directory, a directory in its place).
void check_writable(const std::string& flag, const std::string& path);
// Reads a whole file; throws gpt::Error naming the path when it can't be read.
std::string read_file(const std::string& path);
// CRC-32 (IEEE) continuing from `crc` (start with 0).
uint32_t crc32_update(uint32_t crc, const void* data, size_t bytes);
// Sorted list of files matching a glob pattern, possibly none; throws gpt::Error naming the flag when the
// pattern is empty or its directories cannot be read.
std::vector<std::string> glob_matches(const std::string& pattern, const std::string& flag_name);
// Sorted list of files matching a glob pattern; throws gpt::Error naming the flag when nothing matches.
std::vector<std::string> glob_files(const std::string& pattern, const std::string& flag_name);

}  // namespace gpt
