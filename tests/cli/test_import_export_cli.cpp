// `gpt import` and `gpt export --format` as a user runs them: the fixture's Hugging Face file imports, exports
// back to safetensors and re-imports to the same model file byte for byte; a hub folder (config.json beside
// the weights, in one file or in shards) imports with config.json's heads; an exported folder, read by an
// independent reader written from transformers' conventions (scripts/hf_folder_loss.py, numpy), gives the
// loss `gpt eval` gives; bad flags and bad files end with a non-zero exit and one "error: ..." line naming the
// flag or the file.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
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

void copy_folder(const std::string& from, const std::string& to) {
  std::filesystem::copy(from, to, std::filesystem::copy_options::recursive);
}

TEST(CliImport, HubFoldersWithConfigJson) {
  const std::string d = scratch_dir();
  CliResult a = run_gpt("import --from " + fixture("hub_gpt2_h4") + " --out " + d + "/a.bin");
  ASSERT_EQ(a.code, 0) << a.out;
  EXPECT_NE(a.out.find("L=2 NH=4 C=64 maxT=32 V=100 Vp=128"), std::string::npos) << a.out;
  EXPECT_NE(a.out.find("heads from config.json, config.json agrees"), std::string::npos) << a.out;
  CliResult b = run_gpt("import --from " + fixture("hub_gpt2_h4_sharded/") + " --out " + d + "/b.bin");
  ASSERT_EQ(b.code, 0) << b.out;
  EXPECT_NE(b.out.find("F16 weights in 2 shards, heads from config.json"), std::string::npos) << b.out;
  EXPECT_TRUE(read_file(d + "/a.bin") == read_file(d + "/b.bin"));
  expect_gpt_error("import --from " + fixture("hub_gpt2_h4") + " --n-head 2 --out " + d + "/x.bin",
                   "--n-head 2) contradicts " + fixture("hub_gpt2_h4") + "/config.json");
  copy_folder(fixture("hub_gpt2_h4_sharded"), d + "/sharded");
  std::filesystem::remove(d + "/sharded/model-00002-of-00002.safetensors");
  expect_gpt_error("import --from " + d + "/sharded --out " + d + "/x.bin",
                   "shard " + d + "/sharded/model-00002-of-00002.safetensors is missing");
  copy_folder(fixture("hub_gpt2_h4"), d + "/corrupt");
  write_file_atomic(d + "/corrupt/config.json", "{\"n_head\": 4", 13);
  expect_gpt_error("import --from " + d + "/corrupt --out " + d + "/x.bin", d + "/corrupt/config.json: byte");
}

TEST(CliExport, SafetensorsFolderWithConfigJson) {
  const std::string d = scratch_dir();
  ASSERT_EQ(run_gpt("import --from " + fixture("hub_gpt2_h4") + " --out " + d + "/a.bin").code, 0);
  CliResult x = run_gpt("export --from " + d + "/a.bin --format safetensors --out " + d + "/hf");
  ASSERT_EQ(x.code, 0) << x.out;
  EXPECT_NE(x.out.find(d + "/hf/model.safetensors + " + d + "/hf/config.json"), std::string::npos) << x.out;
  CliResult b = run_gpt("import --from " + d + "/hf --out " + d + "/b.bin");  // 4 heads: only config.json says so
  ASSERT_EQ(b.code, 0) << b.out;
  EXPECT_NE(b.out.find("NH=4"), std::string::npos) << b.out;
  EXPECT_TRUE(read_file(d + "/a.bin") == read_file(d + "/b.bin"));
  // An --out ending in .safetensors is that file, with config.json beside it.
  expect_gpt_error("export --from " + d + "/a.bin --format safetensors --out " + d + "/one/m.safetensors",
                   d + "/one/m.safetensors");  // the file's folder must exist
  std::filesystem::create_directory(d + "/one");
  ASSERT_EQ(run_gpt("export --from " + d + "/a.bin --format safetensors --out " + d + "/one/m.safetensors").code, 0);
  EXPECT_TRUE(read_file(d + "/one/m.safetensors") == read_file(d + "/hf/model.safetensors"));
  EXPECT_TRUE(read_file(d + "/one/config.json") == read_file(d + "/hf/config.json"));
  expect_gpt_error("export --from " + d + "/a.bin --format safetensors --out " + d + "/a.bin", "is not a folder");
}

// The first number after `key ` on the last line that has it.
double number_after(const std::string& out, const std::string& key) {
  const size_t at = out.rfind(key + " ");
  return at == std::string::npos ? NAN : std::strtod(out.c_str() + at + key.size() + 1, nullptr);
}

std::string python_with_numpy() {
  for (const char* py : {"python3", "/usr/bin/python3"})
    if (run_command(std::string(py) + " -c 'import numpy'") == 0) return py;
  return "";
}

// The reader itself against PyTorch: on the fixture's hub folder (4 heads from config.json, F16, tied head) it
// gives the float64 loss scripts/make_safetensors_golden.py computed with torch on the same tokens. Both are
// float64; the bound is the one derived below with u = 2^-53 (fixture: L 2, C 64, 4 heads, T 32, V 100, B 2).
TEST(CliExport, TheReaderGivesPyTorchsLossOnTheHubFolder) {
  const std::string py = python_with_numpy();
  if (py.empty()) GTEST_SKIP() << "no python3 with numpy (scripts/install_deps.sh installs it): the reader cannot run";
  std::string out;
  ASSERT_EQ(run_command(py + " " + source_dir() + "/scripts/hf_folder_loss.py " + fixture("hub_gpt2_h4") + " --pairs " +
                            fixture("tokens.bin") + " -B 2 -T 32", &out), 0) << out;
  const std::string expected = read_file(fixture("expected.json"));
  const size_t hub = expected.find("\"hub\"");
  ASSERT_NE(hub, std::string::npos);
  const double torch64 = number_after(expected.substr(0, expected.find("loss_one_head", hub)), "\"loss_f64\":");
  const double reader = number_after(out, "loss");
  const double bound = std::ldexp(1.0, -53) * (2 * (11 * 64 + 16 + 2 * 32) + 3 * 64 + 100 + 2 * 32);
  EXPECT_LE(std::fabs(reader - torch64) / torch64, bound) << "reader " << reader << " torch " << torch64;
}

// A trained model exported as a folder, read by scripts/hf_folder_loss.py as GPT2LMHeadModel.from_pretrained
// would read it (config.json's heads, epsilon and activation, HF names, Conv1D [in, out], lm_head tied to wte),
// gives gpt eval's loss on the same tokens.
// Bound: the reader computes in float64 (its own error, ~1e-16, is neglected); ours is fp32. A sum of n terms
// in fp32, in any order or blocking, is off by at most n*u times the sum of its terms' magnitudes (u = 2^-24;
// Higham, Accuracy and Stability, 3.1), so taking each reduction's terms as of one sign (condition 1), to first
// order the loss's relative error is at most u times the reductions' lengths added along one token's path:
// per block the two LayerNorms (2 sums of C each), qkv (C), scores (hs), softmax sum and att @ v (T each),
// attention projection (C), fc (C), fc projection (4C): 11C + hs + 2T; then ln_f (2C), logits (C), logsumexp (V)
// and the mean over the batch's B*T positions. gpt eval prints 6 significant digits: 5e-6 relative more.
// A run under --wrap blocks:2 writes its model file, and `gpt export` consolidates its checkpoint, both in
// the file's own layout (the tensors found wherever the run's units put them): the two are the same bytes.
// Started from that file (--init-from), runs under two wraps train the same bytes too.
TEST(CliExport, ModelFilesAndExportsDoNotDependOnTheWrap) {
  const std::string data = shakespeare_byte_dir(), d = scratch_dir();
  const std::string model = "--n-layer 3 --n-head 2 --d-model 32 --seq-len 32 --tokenizer byte -B 2 -T 32 --steps 2 "
                            "--sample-tokens 0 --train '" + data + "/train_*.bin' ";
  CliResult t = run_gpt("train " + model + "--wrap blocks:2 --out " + d + "/run");
  ASSERT_EQ(t.code, 0) << t.out;
  EXPECT_NE(t.out.find("wrap blocks:2 (3 units)"), std::string::npos) << t.out;
  CliResult x = run_gpt("export --from " + d + "/run --out " + d + "/exported.bin");
  ASSERT_EQ(x.code, 0) << x.out;
  EXPECT_TRUE(read_file(d + "/run/model.bin") == read_file(d + "/exported.bin"));
  for (const char* wrap : {"block", "blocks:3"}) {
    CliResult r = run_gpt("train " + model + "--init-from " + d + "/run/model.bin --wrap " + wrap + " --out " + d +
                          "/from_" + wrap);
    ASSERT_EQ(r.code, 0) << r.out;
  }
  EXPECT_TRUE(read_file(d + "/from_block/model.bin") == read_file(d + "/from_blocks:3/model.bin"));
  EXPECT_FALSE(read_file(d + "/from_block/model.bin") == read_file(d + "/run/model.bin"));  // it trained on
}

TEST(CliExport, ExportedFolderGivesGptEvalsLossInAnIndependentReader) {
  const std::string py = python_with_numpy();
  if (py.empty()) GTEST_SKIP() << "no python3 with numpy (scripts/install_deps.sh installs it): the reader cannot run";
  const std::string data = shakespeare_byte_dir(), d = scratch_dir(), script = source_dir() + "/scripts/hf_folder_loss.py";
  const int L = 2, NH = 4, C = 64, T = 32, B = 4, V = 257;  // C/64 would give 1 head: config.json must say 4
  CliResult t = run_gpt("train --n-layer 2 --n-head 4 --d-model 64 --seq-len 32 --tokenizer byte -B 4 -T 32 --steps 100 "
                        "--lr 3e-3 --sample-tokens 0 --train '" + data + "/train_*.bin' --out " + d + "/run");
  ASSERT_EQ(t.code, 0) << t.out;
  CliResult x = run_gpt("export --from " + d + "/run/model.bin --format safetensors --out " + d + "/hf");
  ASSERT_EQ(x.code, 0) << x.out;
  const std::string val = glob_files(data + "/val_*.bin", "val")[0];
  const std::string batch = " -B 4 -T 32 --batches 3";
  CliResult e = run_gpt("eval --model " + d + "/run/model.bin --val " + val + batch);
  ASSERT_EQ(e.code, 0) << e.out;
  std::string out;
  ASSERT_EQ(run_command(py + " " + script + " " + d + "/hf --data " + val + batch, &out), 0) << out;
  const double ours = number_after(e.out, "val_loss"), reader = number_after(out, "loss");
  const double u = std::ldexp(1.0, -24);
  const double bound = u * (L * (11 * C + C / NH + 2 * T) + 3 * C + V + B * T) + 5e-6;
  const double rel = std::fabs(ours - reader) / reader;
  std::printf("[ reader ] gpt eval %.6g, independent reader %.9f: relative difference %.3g (bound %.3g)\n", ours,
              reader, rel, bound);
  EXPECT_LE(rel, bound) << e.out << out;
  // The reader takes the heads from config.json: with C/64 = 1 head the same weights give another loss, far
  // outside the bound (the model is trained enough, 100 steps, that its attention matters).
  copy_folder(d + "/hf", d + "/one_head");
  std::string cfg = read_file(d + "/one_head/config.json");
  const size_t at = cfg.find("\"n_head\": 4,");
  ASSERT_NE(at, std::string::npos) << cfg;
  cfg.replace(at, 12, "\"n_head\": 1,");
  write_file_atomic(d + "/one_head/config.json", cfg.data(), cfg.size());
  ASSERT_EQ(run_command(py + " " + script + " " + d + "/one_head --data " + val + batch, &out), 0) << out;
  const double one = number_after(out, "loss");
  std::printf("[ reader ] with 1 head: %.9f\n", one);
  EXPECT_GT(std::fabs(one - reader) / reader, 10 * bound);
}

}  // namespace
}  // namespace gpt::test
