// Bad input that a sweep of every subcommand's flags once let through: a value that parsed loosely, a flag
// that changed nothing, an output path that was a directory or the input itself, validation data checked
// only at the first evaluation, a model file with non-finite weights. Each must now end in one "error:"
// line naming the flag or file, before any work is done.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <limits>

#include "src/io/atomic_file.h"
#include "tests/common/test_paths.h"

namespace gpt::test {
namespace {

const char* kTiny = "train --n-layer 2 --n-head 2 --d-model 32 --seq-len 32 --tokenizer byte -B 2 -T 32 --sample-tokens 0 ";

// A model file written by gpt train --steps 0 (initial weights), under dir.
std::string make_model(const std::string& dir) {
  CliResult r = run_gpt(std::string(kTiny) + "--steps 0 --quiet --train '" + shakespeare_byte_dir() + "/train_*.bin' --out " + dir);
  EXPECT_EQ(r.code, 0) << r.out;
  return dir + "/model.bin";
}

TEST(BadInput, FlagValuesParseStrictly) {
  expect_gpt_error("memplan --config d2 --bogus", "unknown flag --bogus");  // last and valueless: unknown first
  expect_gpt_error("memplan --config d2 -B", "flag -B needs a value");
  expect_gpt_error("memplan --config d2 --world=2", "write '--world 2'");
  expect_gpt_error("memplan --config d2 --budget ''", "--budget expects a value, got an empty string");
  expect_gpt_error("memplan --config d2 -B ' 4'", "-B expects an integer");
  expect_gpt_error("train --config d2 --train /nonexistent.bin --grad-clip 0x10", "--grad-clip expects a number");
  expect_gpt_error("train --config d2 --train /nonexistent.bin --out ''", "--out expects a value");
  // a vocabulary the named tokenizer does not have: the model could never be sampled with it
  expect_gpt_error("train --config d2 --tokenizer byte --vocab 256 --train /nonexistent.bin",
                   "--vocab 256: the byte tokenizer has 257 tokens");
  expect_gpt_error("memplan --config d2 --tokenizer gpt2 --vocab 50304", "the gpt2 tokenizer has 50257 tokens");
}

TEST(BadInput, FlagsThatWouldChangeNothingAreRefused) {
  expect_gpt_error("memplan --config d2 --hardware " + source_dir() + "/data/hardware/h100.json",
                   "--hardware is read only with --time or --sweep");
  expect_gpt_error("memplan --config d2 --sweep-shard full", "--sweep-shard is read only with --sweep");
  expect_gpt_error("bench --config d2 -B 1 -T 8 --val '" + shakespeare_byte_dir() + "/val_*.bin'", "gpt bench: --val has no effect");
  expect_gpt_error("bench --config d2 -B 1 -T 8 --trace t.json", "gpt bench: --trace has no effect");
}

// --engine naive (src/fsdp/naive_engine.h) has no code for the full engine's options: each is one line naming
// the flag, not a run that ignores it; the model's own levers (recompute, activation offload, wrap) run.
TEST(BadInput, TheNaiveEngineRefusesTheFullEnginesOptions) {
  const std::string t = std::string(kTiny) + "--steps 1 --train '" + shakespeare_byte_dir() + "/train_*.bin' ";
  const std::string naive = t + "--engine naive ";
  expect_gpt_error(t + "--engine fast", "--engine: expected full or naive, got 'fast'");
  expect_gpt_error(naive + "--shard hybrid --shard-group 1", "--engine naive: --shard hybrid is the full engine's");
  expect_gpt_error(naive + "--offload params", "--engine naive: --offload params is the full engine's");
  expect_gpt_error(naive + "--offload optimizer,activations", "--engine naive: --offload optimizer is the full engine's");
  expect_gpt_error(naive + "--no-sync", "--engine naive: --no-sync is the full engine's");
  expect_gpt_error(naive + "--reduce-dtype bf16", "--engine naive: --reduce-dtype bf16 is the full engine's");
  expect_gpt_error(naive + "--gather-slots 2", "--engine naive: --gather-slots is the full engine's");
  expect_gpt_error(naive + "--plan auto", "--engine naive: --plan auto plans the full engine's levers");
  expect_gpt_error("memplan --config d2 --engine naive", "gpt memplan: --engine naive is not planned");
  const CliResult r = run_gpt(naive + "--quiet --recompute full --wrap blocks:2 --offload activations --shard grad_op");
  EXPECT_EQ(r.code, 0) << r.out;
}

// Tensor parallelism's mesh and split, each refused in one line naming the values, before anything runs.
TEST(BadInput, TensorParallelMeshesThatCannotWork) {
  const std::string m = "memplan --n-layer 2 --n-head 4 --d-model 64 --vocab 97 -B 2 -T 8 ";
  expect_gpt_error(m + "--world 2 --tp 4", "--tp 4 is larger than --world 2");
  expect_gpt_error(m + "--world 6 --tp 4", "--tp 4 must divide --world 6");
  expect_gpt_error("memplan --n-layer 2 --n-head 6 --d-model 96 --vocab 97 --world 6 --tp 4", "--tp 4 must divide");
  expect_gpt_error("memplan --n-layer 2 --n-head 6 --d-model 96 --vocab 97 --world 3 --tp 3",
                   "--tp 3 must divide the padded vocabulary 128");
  expect_gpt_error("memplan --n-layer 2 --n-head 4 --d-model 64 --vocab 97 --world 2 --tp 2 -B 1 -T 7",
                   "must divide the B*T = 7 rows");
  expect_gpt_error(m + "--world 8 --tp 2 --shard hybrid --shard-group 3", "--shard-group 3 must divide");
  expect_gpt_error(m + "--world 2 --sequence-parallel on", "--sequence-parallel on needs --tp > 1");
  expect_gpt_error(m + "--world 2 --tp 2 --sequence-parallel maybe", "--sequence-parallel: expected on or off");
  expect_gpt_error(std::string(kTiny) + "--steps 1 --tp 2 --train '" + shakespeare_byte_dir() + "/train_*.bin'",
                   "--tp 2 is larger than the world size 1");
}

TEST(BadInput, OutputFilesAreChecked) {
  const std::string dir = scratch_dir(), model = make_model(dir + "/run");
  expect_gpt_error("export --from " + model + " --out " + dir, "--out " + dir + ": is a directory");
  expect_gpt_error("import --from " + model + " --out " + model, "is the --from file itself");
  expect_gpt_error("export --from " + dir + "/missing.bin --out " + dir + "/x.bin", "--from " + dir + "/missing.bin");
  std::filesystem::create_directories(dir + "/empty");
  expect_gpt_error("export --from " + dir + "/empty --out " + dir + "/x.bin", "a directory with no checkpoint");
  expect_gpt_error("bench --calibrate --quick --out " + dir, "is a directory");
  expect_gpt_error("tokenize --tokenizer byte --input " + source_dir() + "/data/tinyshakespeare/input.txt --out " + dir +
                       "/tk --shard-size 1",
                   "--shard-size");
}

TEST(BadInput, ValidationDataIsCheckedBeforeTraining) {
  const std::string dir = scratch_dir(), train = "--train '" + shakespeare_byte_dir() + "/train_*.bin' --steps 1 ";
  expect_gpt_error(std::string(kTiny) + train + "--out " + dir + "/a --val '/nonexistent/val_*.bin'", "--val");
  EXPECT_FALSE(std::filesystem::exists(dir + "/a/model.bin")) << "no step may run";
  // 1.1 MB of bytes, a tenth for validation: a few thousand batches of 64 tokens, not a million
  expect_gpt_error(std::string(kTiny) + train + "--val '" + shakespeare_byte_dir() + "/val_*.bin' --val-batches 1000000",
                   "--val-batches 1000000");
  const std::string model = make_model(dir + "/run");
  expect_gpt_error("eval --model " + model + " --val '" + shakespeare_byte_dir() + "/val_*.bin' -B 4 -T 32 --batches 1000000",
                   "--batches 1000000");
}

TEST(BadInput, ModelFilesWithNonFiniteWeightsAreRefused) {
  const std::string dir = scratch_dir(), model = make_model(dir + "/run");
  std::string bytes = read_file(model);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::memcpy(&bytes[1024 + 4 * 100], &nan, sizeof nan);  // wte, element 100 (after the 256 x int32 header)
  const std::string bad = dir + "/nan.bin";
  write_file_atomic(bad, bytes.data(), bytes.size());
  expect_gpt_error("eval --model " + bad + " --val '" + shakespeare_byte_dir() + "/val_*.bin' -T 32",
                   "nan.bin: tensor wte holds a non-finite");
  // --init-from reads the weights after the one-line startup report: the error is the last line
  const CliResult r = run_gpt(std::string(kTiny) + "--steps 1 --train '" + shakespeare_byte_dir() + "/train_*.bin' --init-from " + bad);
  EXPECT_TRUE(r.code != 0 && r.code < 128) << r.code << "\n" << r.out;
  const size_t last = r.out.rfind("error: ");
  ASSERT_NE(last, std::string::npos) << r.out;
  EXPECT_NE(r.out.find("nan.bin: tensor wte holds a non-finite", last), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find('\n', last), r.out.size() - 1) << "the error is one line, the last: " << r.out;
}

}  // namespace
}  // namespace gpt::test
