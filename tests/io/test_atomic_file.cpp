// Atomic writes, whole-file reads, CRC-32 against its published check value, and glob ordering/errors.
#include <gtest/gtest.h>

#include "tests/common/error_of.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "tests/common/test_paths.h"
#include "src/core/check.h"
#include "src/io/atomic_file.h"

namespace fs = std::filesystem;

namespace {

std::vector<std::string> dir_entries(const std::string& dir) {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

using gpt::test::error_of;
using gpt::test::slurp;
using gpt::test::spit;

}  // namespace

TEST(AtomicFile, CommitWritesContent) {
  const std::string dir = gpt::test::scratch_dir(), path = dir + "/out.bin";
  {
    gpt::AtomicWriter w(path);
    w.write("hello ", 6);
    w.write("world", 5);
    EXPECT_EQ(w.bytes_written(), 11u);
    EXPECT_EQ(w.crc32(), gpt::crc32_update(0, "hello world", 11));
    EXPECT_FALSE(fs::exists(path));  // nothing visible before commit
    w.commit();
  }
  EXPECT_EQ(slurp(path), "hello world");
  EXPECT_EQ(dir_entries(dir), std::vector<std::string>{"out.bin"});
}

TEST(AtomicFile, ReplacesExistingFile) {
  const std::string dir = gpt::test::scratch_dir(), path = dir + "/f.txt";
  spit(path, "old content that is longer");
  gpt::write_file_atomic(path, "new", 3);
  EXPECT_EQ(slurp(path), "new");
  EXPECT_EQ(gpt::read_file(path), "new");
}

TEST(AtomicFile, DestroyWithoutCommitKeepsOldFileAndRemovesTemp) {
  const std::string dir = gpt::test::scratch_dir(), path = dir + "/keep.txt";
  spit(path, "old");
  {
    gpt::AtomicWriter w(path);
    w.write("new data", 8);
    EXPECT_EQ(dir_entries(dir).size(), 2u);  // the target and the temp file
  }
  EXPECT_EQ(slurp(path), "old");
  EXPECT_EQ(dir_entries(dir), std::vector<std::string>{"keep.txt"});
}

TEST(AtomicFile, UncreatableTempNamesThePath) {
  const std::string dir = gpt::test::scratch_dir(), path = dir + "/no/such/dir/x.bin";
  std::string msg = error_of([&] { gpt::AtomicWriter w(path); });
  EXPECT_NE(msg.find(path), std::string::npos) << msg;
}

TEST(AtomicFile, ReadFileMissingNamesThePath) {
  const std::string path = gpt::test::scratch_dir() + "/missing.txt";
  EXPECT_THROW(gpt::read_file(path), gpt::Error);
  EXPECT_NE(error_of([&] { gpt::read_file(path); }).find(path), std::string::npos);
}

TEST(AtomicFile, ReadFileBinaryRoundTrip) {
  const std::string path = gpt::test::scratch_dir() + "/bin";
  std::string bytes;
  for (int i = 0; i < 200000; i++) bytes.push_back((char)(i * 31 % 256));  // includes NULs, > one read buffer
  spit(path, bytes);
  EXPECT_EQ(gpt::read_file(path), bytes);
}

TEST(Crc32, CheckValue) {
  EXPECT_EQ(gpt::crc32_update(0, "123456789", 9), 0xCBF43926u);  // the CRC-32/ISO-HDLC check value
  EXPECT_EQ(gpt::crc32_update(0, "", 0), 0u);
  EXPECT_EQ(gpt::crc32_update(0, "a", 1), 0xE8B7BE43u);  // zlib.crc32(b"a")
}

TEST(Crc32, IncrementalEqualsOneShot) {
  const char* s = "The quick brown fox jumps over the lazy dog";
  EXPECT_EQ(gpt::crc32_update(0, s, 43), 0x414FA339u);  // zlib.crc32 of the pangram
  uint32_t c = gpt::crc32_update(0, s, 10);
  c = gpt::crc32_update(c, s + 10, 33);
  EXPECT_EQ(c, 0x414FA339u);
}

TEST(GlobFiles, SortedMatches) {
  const std::string dir = gpt::test::scratch_dir();
  for (const char* n : {"c_2.bin", "a_0.bin", "b_1.bin", "other.txt"}) spit(dir + "/" + n, "x");
  auto files = gpt::glob_files(dir + "/*_*.bin", "--train");
  ASSERT_EQ(files.size(), 3u);
  EXPECT_EQ(files[0], dir + "/a_0.bin");
  EXPECT_EQ(files[1], dir + "/b_1.bin");
  EXPECT_EQ(files[2], dir + "/c_2.bin");
}

TEST(GlobFiles, NoMatchNamesFlagAndPattern) {
  const std::string pattern = gpt::test::scratch_dir() + "/train_*.bin";
  EXPECT_THROW(gpt::glob_files(pattern, "--train"), gpt::Error);
  std::string msg = error_of([&] { gpt::glob_files(pattern, "--train"); });
  EXPECT_NE(msg.find("--train"), std::string::npos) << msg;
  EXPECT_NE(msg.find(pattern), std::string::npos) << msg;
}
