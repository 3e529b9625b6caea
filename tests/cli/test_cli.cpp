// The gpt binary as a user meets it: the happy path (tokenize -> train -> eval -> sample -> export) and
// bad input, where every case must end with a non-zero exit and ONE line "error: ..." naming the flag or
// file — never a crash, a hang or a silent wrong result.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "tests/common/json_lite.h"
#include "tests/common/test_paths.h"
#include "src/io/atomic_file.h"

namespace gpt::test {
namespace {

const char* kTiny = "--n-layer 2 --n-head 2 --d-model 32 --seq-len 32 --tokenizer byte -B 2 -T 32 ";

TEST(Cli, TrainEvalSampleExportRoundTrip) {
  const std::string d = shakespeare_byte_dir(), out = scratch_dir();
  CliResult t = run_gpt(std::string("train ") + kTiny + "--steps 3 --train '" + d + "/train_*.bin' --val '" + d +
                 "/val_*.bin' --val-batches 2 --sample-tokens 8 --out " + out + "/run --metrics " + out + "/m.jsonl");
  ASSERT_EQ(t.code, 0) << t.out;
  EXPECT_NE(t.out.find("step     3/3"), std::string::npos) << t.out;
  std::string metrics = read_file(out + "/m.jsonl");
  EXPECT_EQ(std::count(metrics.begin(), metrics.end(), '\n'), 3);
  EXPECT_NE(metrics.find("\"val_loss\""), std::string::npos);
  CliResult e = run_gpt("eval --model " + out + "/run/model.bin --val '" + d + "/val_*.bin' -B 2 -T 32 --batches 2");
  ASSERT_EQ(e.code, 0) << e.out;
  const std::string last = e.out.substr(e.out.rfind("val_loss "));
  EXPECT_GT(std::stod(last.substr(9)), 0.5);
  CliResult s = run_gpt("sample --model " + out + "/run/model.bin --prompt 'ROMEO:' --tokens 20 --seed 3");
  ASSERT_EQ(s.code, 0) << s.out;
  EXPECT_EQ(s.out.rfind("ROMEO:", 0), 0u) << s.out;
  EXPECT_GT(s.out.size(), 10u);
  CliResult x = run_gpt("export --from " + out + "/run --out " + out + "/exported.bin");
  ASSERT_EQ(x.code, 0) << x.out;
  EXPECT_EQ(read_file(out + "/exported.bin"), read_file(out + "/run/model.bin"));
}

// An unwritable --trace stops the run before its first step, as an unwritable --metrics does: a run that
// was asked for a trace must not end hours later without one.
TEST(Cli, UnwritableTraceStopsTheRunBeforeItsFirstStep) {
  const std::string d = shakespeare_byte_dir(), out = scratch_dir();
  expect_gpt_error(std::string("train ") + kTiny + "--steps 2 --sample-tokens 0 --train '" + d + "/train_*.bin' --out " +
                       out + "/run --trace /nonexistent-dir/trace.json",
                   "--trace /nonexistent-dir/trace.json");
  EXPECT_FALSE(std::filesystem::exists(out + "/run/model.bin")) << "no step may run";
}

// --beta1/--beta2 reach AdamW: stating the defaults changes no bit of the trained model, another beta2
// changes it (Adam's first step is beta-free after bias correction, so three steps are run).
TEST(Cli, AdamBetasReachTheOptimizer) {
  const std::string d = shakespeare_byte_dir(), out = scratch_dir();
  const std::string base = std::string("train ") + kTiny + "--steps 3 --sample-tokens 0 --train '" + d + "/train_*.bin' --out " + out;
  for (const char* run_name : {"default", "stated", "other"}) {
    const std::string extra = std::string(run_name) == "stated" ? " --beta1 0.9 --beta2 0.95"
                              : std::string(run_name) == "other" ? " --beta2 0.99" : "";
    CliResult r = run_gpt(base + "/" + run_name + extra);
    ASSERT_EQ(r.code, 0) << r.out;
  }
  const std::string a = read_file(out + "/default/model.bin");
  ASSERT_FALSE(a.empty());
  EXPECT_EQ(a, read_file(out + "/stated/model.bin"));
  EXPECT_NE(a, read_file(out + "/other/model.bin"));
}

// The integer after "key": in a one-line JSON object, or -1.
long long json_int(const std::string& text, const std::string& key) {
  const size_t at = text.find("\"" + key + "\": ");
  return at == std::string::npos ? -1 : std::stoll(text.substr(at + key.size() + 4));
}

// gpt bench --json reports the ledger's peaks in bytes, and they are what gpt memplan predicted for the same
// flags, to the byte (the figure gpu_check.sh compares on a GPU), under levers that move both domains.
TEST(Cli, BenchPeakBytesAreTheMemoryPlan) {
  const std::string shape = " --n-layer 2 --n-head 2 --d-model 32 --seq-len 32 --vocab 256 -B 2 -T 32";
  for (const char* lever : {"", " --recompute selective", " --offload optimizer --recompute full"}) {
    CliResult b = run_gpt("bench" + shape + lever + " --steps 2 --json --quiet");
    CliResult m = run_gpt("memplan" + shape + lever + " --json");
    ASSERT_EQ(b.code, 0) << b.out;
    ASSERT_EQ(m.code, 0) << m.out;
    EXPECT_GT(json_int(b.out, "peak_device_bytes"), 0) << b.out;
    EXPECT_EQ(json_int(b.out, "peak_device_bytes"), json_int(m.out, "device_peak_bytes")) << lever;
    EXPECT_EQ(json_int(b.out, "peak_host_bytes"), json_int(m.out, "host_peak_bytes")) << lever;
  }
}

// A benchmark result says what ran and against what peak: the attention path (--attention auto resolved),
// and the per-rank peak with its source, which names the CPU (or the GPU). Its JSON line must parse.
TEST(Cli, BenchJsonNamesWhatRan) {
  CliResult b = run_gpt("bench --n-layer 1 --n-head 2 --d-model 32 --seq-len 16 --vocab 256 -B 1 -T 16 --steps 1 --json --quiet");
  ASSERT_EQ(b.code, 0) << b.out;
  const std::string line = b.out.substr(b.out.rfind('{'));
  const test::JValue j = test::parse_json(line);
  EXPECT_EQ(j.at("device").str, "cpu");
  EXPECT_EQ(j.at("attention").str, "simple");  // the CPU's only path
  EXPECT_GT(j.at("peak_tflops_per_rank").num, 0);
  EXPECT_EQ(j.at("peak_source").str.rfind("this CPU's measured fp32 sgemm (", 0), 0u) << line;
  EXPECT_NE(j.at("peak_source").str.find(" kernels, "), std::string::npos) << "names OpenBLAS's kernels: " << line;
  EXPECT_GT(j.at("mfu").num, 0);
}

TEST(Cli, BadFlagsAndConfigs) {
  const std::string d = shakespeare_byte_dir(), train = " --train '" + d + "/train_*.bin'";
  expect_gpt_error("frobnicate", "unknown command");
  expect_gpt_error("train --steps 3" + train + " --bogus 1", "--bogus");
  expect_gpt_error("train -B four" + train, "-B");
  expect_gpt_error("train --config d99" + train, "d99");
  expect_gpt_error("train --n-head 3 --d-model 64" + train, "divisible");
  expect_gpt_error("train --seq-len 16 -T 32" + train, "-T");
  expect_gpt_error("train --config d2", "--train");
  expect_gpt_error("train --config d2 --train '/nonexistent/x_*.bin'", "--train");
  expect_gpt_error("train --config d2 --shard sideways" + train, "--shard");
  expect_gpt_error("train --config d2 --recompute sometimes" + train, "--recompute");
  expect_gpt_error("train --config d2 --offload cloud" + train, "--offload");
  expect_gpt_error("train --config d2 --offload params,optimizer" + train, "at most one of optimizer and params");
  expect_gpt_error("train --config d2 --offload activations,activations" + train, "given twice");
  expect_gpt_error("train --config d2 --offload none,activations" + train, "--offload");
  expect_gpt_error("train --config d2 --wrap blocks:0" + train, "--wrap blocks:K");
  expect_gpt_error("train --config d2 --wrap layers" + train, "--wrap");
  expect_gpt_error("train --config d2 --shard-group 2" + train, "--shard-group");
  expect_gpt_error("train --config d2 --recompute every:0" + train, "every");
  expect_gpt_error("train --config d2 --lr -1" + train, "--lr");
  expect_gpt_error("train --config d2 --beta2 1" + train, "--beta2");
  expect_gpt_error("train --config d2 --beta1 -0.1" + train, "--beta1");
  expect_gpt_error("train --config d2 --init xavier" + train, "--init");
  expect_gpt_error("train --init width --init-from /nonexistent/model.bin" + train, "--init: the weights come from");
  expect_gpt_error("train --config d2 --total-batch 100 -B 2 -T 32" + train, "--total-batch");
  expect_gpt_error("train --config d2 --device tpu" + train, "--device");
  expect_gpt_error("train --config d2 --attention sparse" + train, "--attention");
  expect_gpt_error("train --config d2 --device cpu --attention fused" + train, "--attention fused");
  expect_gpt_error("train --config d2 --device cpu --attention cudnn" + train, "--attention cudnn");
}

// scripts/gpu_check.sh and scripts/gpu_correctness.py take the attention paths to run from this help line.
TEST(Cli, TrainHelpListsTheAttentionPaths) {
  CliResult r = run_gpt("train --help");
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("--attention simple|fused|cudnn, default auto"), std::string::npos) << r.out;
}

TEST(Cli, BadFiles) {
  const std::string d = shakespeare_byte_dir(), dir = scratch_dir();
  // a truncated data shard
  std::string shard = read_file(d + "/val_000000.bin");
  std::string cut = shard.substr(0, shard.size() - 7);
  write_file_atomic(dir + "/cut.bin", cut.data(), cut.size());
  expect_gpt_error(std::string("train ") + kTiny + "--train " + dir + "/cut.bin", "cut.bin");
  // ids beyond the vocabulary: byte data (ids < 257) against a 100-token model, from a copy without its
  // tokenizer record (which would refuse --vocab 100 before the ids are read)
  std::filesystem::create_directories(dir + "/bare");
  std::filesystem::copy_file(d + "/val_000000.bin", dir + "/bare/val_000000.bin");
  expect_gpt_error("train --n-layer 1 --n-head 1 --d-model 8 --vocab 100 --seq-len 32 -B 1 -T 32 --train '" + dir +
                   "/bare/val_*.bin'",
               "val_000000.bin");
  // a model file with the wrong magic
  std::string junk(4096, 'x');
  write_file_atomic(dir + "/junk.bin", junk.data(), junk.size());
  expect_gpt_error("eval --model " + dir + "/junk.bin --val '" + d + "/val_*.bin'", "junk.bin");
  expect_gpt_error("sample --model " + dir + "/missing.bin", "missing.bin");
  // --init-from of a model with another shape
  const std::string out = dir + "/run";
  ASSERT_EQ(run_gpt(std::string("train ") + kTiny + "--steps 1 --sample-tokens 0 --train '" + d + "/train_*.bin' --out " + out).code, 0);
  expect_gpt_error("train --n-layer 2 --n-head 2 --d-model 64 --seq-len 32 --tokenizer byte -B 2 -T 32 --steps 1 --train '" + d +
                   "/train_*.bin' --init-from " + out + "/model.bin",
               "model.bin");
  // a model whose vocabulary does not match the tokenizer it is sampled with
  expect_gpt_error("sample --model " + out + "/model.bin --tokenizer gpt2 --tokens 2", "vocabulary");
  // resume from a checkpoint directory whose rank file was damaged (checksum)
  std::string ck = out + "/ckpt_00000001/rank_00000.bin";
  std::string bytes = read_file(ck);
  bytes[bytes.size() / 2] ^= 0x40;
  write_file_atomic(ck, bytes.data(), bytes.size());
  expect_gpt_error(std::string("train ") + kTiny + "--steps 2 --train '" + d + "/train_*.bin' --out " + out + " --resume", "checksum");
}

}  // namespace
}  // namespace gpt::test

namespace gpt::test {
namespace {

// --init-from takes the model's shape from the file: no model flags are needed, and flags that disagree
// with the file are an error naming both shapes.
TEST(Cli, InitFromTakesTheShapeFromTheFile) {
  const std::string d = shakespeare_byte_dir(), dir = scratch_dir(), out = dir + "/run";
  const std::string data = " -B 2 -T 32 --steps 1 --sample-tokens 0 --train '" + d + "/train_*.bin'";
  ASSERT_EQ(run_gpt(std::string("train ") + kTiny + "--steps 1 --sample-tokens 0 --train '" + d + "/train_*.bin' --out " + out).code, 0);
  const CliResult again = run_gpt("train --init-from " + out + "/model.bin" + data);
  EXPECT_EQ(again.code, 0) << again.out;
  EXPECT_NE(again.out.find("model init-from"), std::string::npos) << again.out;
  const CliResult bad = run_gpt("train --init-from " + out + "/model.bin --n-layer 3" + data);
  EXPECT_NE(bad.code, 0);
  EXPECT_NE(bad.out.find("the file's model is L=2"), std::string::npos) << bad.out;
  EXPECT_NE(bad.out.find("the model flags give L=3"), std::string::npos) << bad.out;
}

// The bundled GPT-2 tokenizer is found without --data-dir from a binary that lies outside the source tree
// (a build directory elsewhere, or a copied binary) run in a directory without data/: the build's own
// source tree is the last place looked.
TEST(Cli, BundledTokenizerFoundFromOutsideTheTree) {
  const std::string dir = scratch_dir();
  ASSERT_EQ(run_command("cp " + gpt_binary() + " " + dir + "/gpt && printf 'Hello world' > " + dir + "/in.txt"), 0);
  std::string out;
  const int code = run_command("cd " + dir + " && OMP_NUM_THREADS=1 timeout 120 ./gpt tokenize --input in.txt " +
                                   "--out shards --tokenizer gpt2 --val-fraction 0",
                               &out);
  EXPECT_EQ(code, 0) << out;
  EXPECT_TRUE(std::ifstream(dir + "/shards/train_000000.bin").good()) << out;
}

}  // namespace
}  // namespace gpt::test
