// A fresh directory, shared by the ranks of one test_fsdp run, holding one token shard of uniform random
// ids: rank 0 writes it, and every rank returns once it is there (a barrier on the world); and the options
// of a short traced run on it.
#pragma once
#include <filesystem>
#include <string>
#include <vector>

#include "src/core/rng.h"
#include "src/io/data_loader.h"
#include "src/train/train_options.h"
#include "tests/fsdp/mpi_world.h"

namespace gpt::test {

// <tmp>/gpt_<name>_np<N>/train_000000.bin: 50000 ids in [0, vocab) from Rng(3). Returns the directory.
inline std::string random_shard_dir(const std::string& name, int vocab) {
  Communicator& w = world();
  const std::string dir =
      (std::filesystem::temp_directory_path() / ("gpt_" + name + "_np" + std::to_string(w.world()))).string();
  if (w.rank() == 0) {
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir);
    Rng rng(3);
    std::vector<int> toks(50000);
    for (auto& t : toks) t = (int)(rng.next_u64() % (uint64_t)vocab);
    write_token_shard(dir + "/train_000000.bin", toks);
  }
  w.barrier();
  return dir;
}

// 2 steps of B = 2, T = 32 on the shard in dir, on the cpu backend, quiet, no tokenizer or samples, a stated
// MFU peak; the trace is written to dir/trace.json.
inline TrainOptions traced_run_options(const std::string& dir, const GPTConfig& model) {
  TrainOptions o;
  o.model = model;
  o.train_pattern = dir + "/train_*.bin";
  o.B = 2;
  o.T = 32;
  o.steps = 2;
  o.device = "cpu";
  o.quiet = true;
  o.tokenizer = "none";
  o.peak_tflops = 1;
  o.trace_path = dir + "/trace.json";
  o.sample_tokens = 0;
  return o;
}

}  // namespace gpt::test
