// Tensor parallelism through the command line: a run of `gpt train --tp 2` on 2 ranks exports a model file
// that `gpt eval` loads, with or without --tp, giving the loss the run measured at its last step; `gpt export`
// consolidates its checkpoint (the tensor-parallel slices and their data-parallel shards) into the same bytes
// the run wrote; `gpt sample --tp 2` prints its tokens once, from rank 0.
// The losses: the same weights evaluated on the same batches, one process against a group of two, differ in
// the association of the row-parallel products' sums and of the loss's exponentials only, far below the
// 6 significant digits the lines print (so each value is within 5e-6 of its printed one at a loss near 5).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <regex>
#include <string>

#include "src/io/atomic_file.h"
#include "tests/common/test_paths.h"

namespace gpt::test {
namespace {

const std::string kModel = "--n-layer 2 --n-head 4 --d-model 64 --seq-len 32 -B 4 -T 32 ";

double last_value(const std::string& out, const std::string& pattern) {
  std::smatch m;
  double v = NAN;
  std::string rest = out;
  const std::regex re(pattern + " ([0-9.]+)");
  while (std::regex_search(rest, m, re)) {
    v = std::stod(m[1]);
    rest = m.suffix();
  }
  return v;
}

CliResult ranks(int n, const std::string& args) {
  CliResult r;
  r.code = run_command("export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1 "
                       "OPENBLAS_NUM_THREADS=1; timeout 300 mpiexec -n " + std::to_string(n) + " --oversubscribe " +
                           gpt_binary() + " " + args,
                       &r.out);
  return r;
}

TEST(TpCli, AnExportedRunEvaluatesToItsOwnLossAndConsolidates) {
  if (run_command("command -v mpiexec") != 0) GTEST_SKIP() << "mpiexec not installed";
  const std::string dir = scratch_dir(), run = dir + "/run", data = shakespeare_byte_dir();
  const std::string val = " --val '" + data + "/val_*.bin'";
  const CliResult t = ranks(2, "train " + kModel + "--steps 12 --save-every 12 --quiet --tp 2 --sample-tokens 0 --train '" +
                                   data + "/train_*.bin'" + val + " --val-batches 4 --out " + run);
  ASSERT_EQ(t.code, 0) << t.out;
  const double trained = last_value(t.out, "val_loss");
  ASSERT_TRUE(std::isfinite(trained)) << t.out;
  const CliResult one = run_gpt("eval --model " + run + "/model.bin -B 4 -T 32 --batches 4" + val);
  ASSERT_EQ(one.code, 0) << one.out;
  const CliResult two = ranks(2, "eval --tp 2 --model " + run + "/model.bin -B 4 -T 32 --batches 4" + val);
  ASSERT_EQ(two.code, 0) << two.out;
  const double printed = 1e-5;  // two values each rounded to 6 significant digits near 5
  EXPECT_NEAR(last_value(one.out, "val_loss"), trained, printed) << one.out;
  EXPECT_NEAR(last_value(two.out, "val_loss"), trained, printed) << two.out;

  const CliResult e = run_gpt("export --from " + run + " --out " + dir + "/exported.bin");
  ASSERT_EQ(e.code, 0) << e.out;
  EXPECT_EQ(read_log(dir + "/exported.bin"), read_log(run + "/model.bin"))
      << "the checkpoint's consolidation differs from the model the run wrote";

  const CliResult s = ranks(2, "sample --tp 2 --model " + run + "/model.bin --prompt ROMEO: --tokens 8 --seed 3");
  ASSERT_EQ(s.code, 0) << s.out;
  size_t count = 0;
  for (size_t at = s.out.find("ROMEO:"); at != std::string::npos; at = s.out.find("ROMEO:", at + 1)) count++;
  EXPECT_EQ(count, 1u) << "the prompt and its tokens print once, from rank 0:\n" << s.out;

  // --init-from the exported file: one process and a group of two start from the same weights (the group's
  // slices cut from the file's whole tensors), so their first steps' losses agree as the evaluations do
  const std::string init = "train " + kModel + "--steps 1 --quiet --sample-tokens 0 --init-from " + run +
                           "/model.bin --train '" + data + "/train_*.bin' --metrics ";
  const CliResult i1 = run_gpt(init + dir + "/i1.jsonl");
  const CliResult i2 = ranks(2, init + dir + "/i2.jsonl --tp 2");
  ASSERT_EQ(i1.code, 0) << i1.out;
  ASSERT_EQ(i2.code, 0) << i2.out;
  EXPECT_NEAR(last_value(read_log(dir + "/i1.jsonl"), "\"loss\":"), last_value(read_log(dir + "/i2.jsonl"), "\"loss\":"),
              printed);
}

// A checkpoint whose recorded tensor-parallel size no mesh of its files can hold (T = 3 over 2 ranks) is a
// one-line error naming the file, not a misread model: the header word is rewritten and the manifest's
// checksum with it, so only the size is wrong.
TEST(TpCli, ACheckpointWithAnImpossibleSizeIsRefused) {
  if (run_command("command -v mpiexec") != 0) GTEST_SKIP() << "mpiexec not installed";
  const std::string dir = scratch_dir(), run = dir + "/run";
  const CliResult t = ranks(2, "train " + kModel + "--steps 1 --quiet --tp 2 --sample-tokens 0 --train '" +
                                   shakespeare_byte_dir() + "/train_*.bin' --out " + run);
  ASSERT_EQ(t.code, 0) << t.out;
  const std::string ckpt = run + "/ckpt_00000001", file = ckpt + "/rank_00000.bin";
  std::string bytes = read_log(file);
  const int64_t three = 3;
  ASSERT_GT(bytes.size(), 8u + 26 * 8);
  std::memcpy(&bytes[8 + 25 * 8], &three, 8);  // word 25: the tensor-parallel size (checkpoint.cpp)
  write_file_atomic(file, bytes.data(), bytes.size());
  std::string manifest = read_log(ckpt + "/manifest.txt");
  const std::string line = "file rank_00000.bin " + std::to_string(bytes.size()) + " ";
  const size_t at = manifest.find(line);
  ASSERT_NE(at, std::string::npos) << manifest;
  const size_t end = manifest.find('\n', at);
  manifest.replace(at, end - at, line + std::to_string(crc32_update(0, bytes.data(), bytes.size())));
  write_file_atomic(ckpt + "/manifest.txt", manifest.data(), manifest.size());
  expect_gpt_error("export --from " + ckpt + " --out " + dir + "/x.bin",
                   "checkpoint file " + file + ": tensor-parallel size 3 does not divide its world 2");
}

}  // namespace
}  // namespace gpt::test
