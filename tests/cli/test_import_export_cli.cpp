// `gpt import` and `gpt export --format` as a user runs them: the fixture's Hugging Face file imports, exports
// back to safetensors and re-imports to the same model file byte for byte; bad flags and bad files end with
// a non-zero exit and one "error: ..." line naming the flag or the file.
#include <gtest/gtest.h>

#include <string>

#include "src/io/atomic_file.h"
#include "tests/common/test_paths.h"

namespace gpt::test {
namespace {

struct Result {
  int code;
  std::string out;
};
Result run(const std::string& args) {
  Result r;
  r.code = run_command("OMP_NUM_THREADS=1 timeout 120 " + gpt_binary() + " " + args, &r.out);
  return r;
}

void expect_error(const std::string& args, const std::string& needle) {
  Result r = run(args);
  EXPECT_NE(r.code, 0) << args << "\n" << r.out;
  EXPECT_LT(r.code, 128) << "crashed (signal): " << args << "\n" << r.out;
  size_t lines = 0;
  for (char c : r.out) lines += c == '\n';
  EXPECT_EQ(lines, 1u) << args << "\n" << r.out;
  EXPECT_EQ(r.out.rfind("error: ", 0), 0u) << r.out;
  EXPECT_NE(r.out.find(needle), std::string::npos) << "expected '" << needle << "' in: " << r.out;
}

std::string fixture(const std::string& f) { return source_dir() + "/tests/fixtures/safetensors_gpt2/" + f; }

TEST(CliImport, ImportExportReimport) {
  const std::string d = scratch_dir();
  Result a = run("import --from " + fixture("model_fp16.safetensors") + " --out " + d + "/a.bin --n-head 2");
  ASSERT_EQ(a.code, 0) << a.out;
  EXPECT_NE(a.out.find("L=2 NH=2 C=64 maxT=32 V=100 Vp=128"), std::string::npos) << a.out;
  EXPECT_NE(a.out.find("lm_head.weight tied"), std::string::npos) << a.out;
  Result x = run("export --from " + d + "/a.bin --format safetensors --out " + d + "/a.safetensors");
  ASSERT_EQ(x.code, 0) << x.out;
  Result b = run("import --from " + d + "/a.safetensors --out " + d + "/b.bin");  // NH from the metadata
  ASSERT_EQ(b.code, 0) << b.out;
  EXPECT_TRUE(read_file(d + "/a.bin") == read_file(d + "/b.bin"));
  Result c = run("export --from " + d + "/b.bin --out " + d + "/c.bin");  // --format bin is the default
  ASSERT_EQ(c.code, 0) << c.out;
  EXPECT_TRUE(read_file(d + "/a.bin") == read_file(d + "/c.bin"));
  Result h = run("import --help");
  EXPECT_EQ(h.code, 0);
  EXPECT_NE(h.out.find("C/64"), std::string::npos) << h.out;
}

TEST(CliImport, BadFlagsAndFiles) {
  const std::string d = scratch_dir(), st = fixture("model_fp32.safetensors");
  expect_error("import --out " + d + "/x.bin", "--from is required");
  expect_error("import --from " + st, "--out is required");
  expect_error("import --from " + st + " --out " + d + "/x.bin --n-head 0", "--n-head");
  expect_error("import --from " + st + " --out " + d + "/x.bin --n-head two", "--n-head");
  expect_error("import --from " + st + " --out " + d + "/x.bin --heads 2", "unknown flag --heads");
  expect_error("import --from " + d + "/missing.safetensors --out " + d + "/x.bin", "missing.safetensors");
  const std::string junk(100, '{');
  write_file_atomic(d + "/junk.safetensors", junk.data(), junk.size());
  expect_error("import --from " + d + "/junk.safetensors --out " + d + "/x.bin", "junk.safetensors");
  expect_error("import --from " + st + " --n-head 3 --out " + d + "/x.bin", "model_fp32.safetensors");
  expect_error("import --from " + st + " --out /nonexistent-dir/x.bin", "/nonexistent-dir/x.bin");
  expect_error("export --from " + st + " --out " + d + "/y.bin", "model_fp32.safetensors");  // not an llm.c file
  expect_error("export --from " + d + " --out " + d + "/y.bin --format onnx", "--format");
}

}  // namespace
}  // namespace gpt::test
