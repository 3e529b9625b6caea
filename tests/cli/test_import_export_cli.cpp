// `gpt import` and `gpt export --format` as a user runs them: the fixture's Hugging Face file imports, exports
// back to safetensors and re-imports to the same model file byte for byte; bad flags and bad files end with
// a non-zero exit and one "error: ..." line naming the flag or the file.
#include <gtest/gtest.h>

#include <string>

#include "src/io/atomic_file.h"
#include "tests/common/test_paths.h"

namespace gpt::test {
namespace {

std::string fixture(const std::string& f) { return source_dir() + "/tests/fixtures/safetensors_gpt2/" + f; }

TEST(CliImport, ImportExportReimport) {
  const std::string d = scratch_dir();
  CliResult a = run_gpt("import --from " + fixture("model_fp16.safetensors") + " --out " + d + "/a.bin --n-head 2");
  ASSERT_EQ(a.code, 0) << a.out;
  EXPECT_NE(a.out.find("L=2 NH=2 C=64 maxT=32 V=100 Vp=128"), std::string::npos) << a.out;
  EXPECT_NE(a.out.find("lm_head.weight tied"), std::string::npos) << a.out;
  CliResult x = run_gpt("export --from " + d + "/a.bin --format safetensors --out " + d + "/a.safetensors");
  ASSERT_EQ(x.code, 0) << x.out;
  CliResult b = run_gpt("import --from " + d + "/a.safetensors --out " + d + "/b.bin");  // NH from the metadata
  ASSERT_EQ(b.code, 0) << b.out;
  EXPECT_TRUE(read_file(d + "/a.bin") == read_file(d + "/b.bin"));
  CliResult c = run_gpt("export --from " + d + "/b.bin --out " + d + "/c.bin");  // --format bin is the default
  ASSERT_EQ(c.code, 0) << c.out;
  EXPECT_TRUE(read_file(d + "/a.bin") == read_file(d + "/c.bin"));
  CliResult h = run_gpt("import --help");
  EXPECT_EQ(h.code, 0);
  EXPECT_NE(h.out.find("C/64"), std::string::npos) << h.out;
}

TEST(CliImport, BadFlagsAndFiles) {
  const std::string d = scratch_dir(), st = fixture("model_fp32.safetensors");
  expect_gpt_error("import --out " + d + "/x.bin", "--from is required");
  expect_gpt_error("import --from " + st, "--out is required");
  expect_gpt_error("import --from " + st + " --out " + d + "/x.bin --n-head 0", "--n-head");
  expect_gpt_error("import --from " + st + " --out " + d + "/x.bin --n-head two", "--n-head");
  expect_gpt_error("import --from " + st + " --out " + d + "/x.bin --heads 2", "unknown flag --heads");
  expect_gpt_error("import --from " + d + "/missing.safetensors --out " + d + "/x.bin", "missing.safetensors");
  const std::string junk(100, '{');
  write_file_atomic(d + "/junk.safetensors", junk.data(), junk.size());
  expect_gpt_error("import --from " + d + "/junk.safetensors --out " + d + "/x.bin", "junk.safetensors");
  expect_gpt_error("import --from " + st + " --n-head 3 --out " + d + "/x.bin", "model_fp32.safetensors");
  expect_gpt_error("import --from " + st + " --out /nonexistent-dir/x.bin", "/nonexistent-dir/x.bin");
  expect_gpt_error("export --from " + st + " --out " + d + "/y.bin", "model_fp32.safetensors");  // not an llm.c file
  expect_gpt_error("export --from " + d + " --out " + d + "/y.bin --format onnx", "--format");
}

}  // namespace
}  // namespace gpt::test
