// `gpt train` and `gpt bench`.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <vector>

#include "cli/commands.h"
#include "cli/train_flags.h"
#include "core/check.h"
#include "core/rng.h"
#include "dist/collective_check.h"
#include "io/data_loader.h"
#include "train/trainer.h"
#include "util/log.h"

namespace gpt {

int cmd_train(int argc, char** argv, Communicator& world) {
  Flags f("train", argc, argv, kTrainSwitches);
  if (f.help()) {
    std::printf("usage: gpt train --train GLOB [--val GLOB] [flags]\n"
                "Trains a GPT-2 model; launch with mpirun -n N for N ranks.\n%s%s",
                kModelFlagsHelp, kTrainFlagsHelp);
    return 0;
  }
  TrainOptions o = parse_train_flags(f, "d6");
  f.required("--train");
  f.finish();
  if (!o.out_dir.empty()) {
    collective_check(world, "--out", [&] {
      std::error_code ec;
      std::filesystem::create_directories(o.out_dir, ec);
      GPT_CHECK(!ec, "--out: cannot create ", o.out_dir, ": ", ec.message());
    });
  }
  Trainer t(o, world);
  t.run();
  return 0;
}

// Writes a shard of random tokens (fixed seed) big enough for the benchmark's steps.
static std::string make_bench_shard(const TrainOptions& o, int world_size, int steps) {
  const int64_t need = (int64_t)o.B * o.T * world_size * (steps + 1) + 1;
  const std::string path = std::filesystem::temp_directory_path().string() + "/gpt_bench_" +
                           std::to_string(o.model.vocab_size) + "_" + std::to_string(need) + ".bin";
  if (!std::filesystem::exists(path)) {
    Rng rng(4242);
    std::vector<int> toks((size_t)need);
    for (auto& t : toks) t = (int)(rng.next_u64() % (uint64_t)o.model.vocab_size);
    write_token_shard(path, toks);
  }
  return path;
}

int cmd_bench(int argc, char** argv, Communicator& world) {
  Flags f("bench", argc, argv, kTrainSwitches);
  if (f.help()) {
    std::printf("usage: gpt bench --config d12 -B 4 -T 64 [--steps N] [--json] [train flags]\n"
                "Times training steps on random tokens: ms/step (median), tokens/s, MFU, peak memory.\n%s%s",
                kModelFlagsHelp, kTrainFlagsHelp);
    return 0;
  }
  TrainOptions o = parse_train_flags(f, "d12");
  if (!f.has("--steps")) o.steps = 5;
  const bool json = f.on("--json");
  f.finish();
  GPT_CHECK(o.steps >= 1, "--steps must be >= 1 for bench");
  const int warm = 1;
  collective_check(world, "bench data", [&] {
    if (world.rank() == 0) o.train_pattern = make_bench_shard(o, world.world(), o.steps + warm);
  });
  world.barrier();
  if (world.rank() != 0) o.train_pattern = make_bench_shard(o, world.world(), o.steps + warm);
  o.steps += warm;
  o.quiet = true;
  Trainer t(o, world);
  std::vector<double> ms;
  double mfu = 0, tps = 0;
  for (int i = 0; i < o.steps; i++) {
    t.backend().ledger().reset_peaks();
    StepStats s = t.step();
    if (i >= warm) ms.push_back(s.ms);
  }
  std::sort(ms.begin(), ms.end());
  const double med = ms[ms.size() / 2];
  tps = t.options().total_batch / (med / 1e3);
  mfu = tps * t.flops_per_token() / (t.peak_flops() * world.world());
  const double peak_mib = t.backend().ledger().peak_total(MemDomain::device) / 1048576.0;
  if (json) {
    log_rank0(world, "{\"config\": \"", o.config_name, "\", \"params\": ", o.model.num_params(), ", \"B\": ", o.B,
              ", \"T\": ", o.T, ", \"ranks\": ", world.world(), ", \"device\": \"", t.backend().name(),
              "\", \"recompute\": \"", o.recompute.str(), "\", \"offload\": \"", FsdpOptions::name(o.fsdp.offload),
              "\", \"shard\": \"", FsdpOptions::name(o.fsdp.strategy), "\", \"ms_per_step\": ", med,
              ", \"tokens_per_s\": ", tps, ", \"mfu\": ", mfu, ", \"peak_device_mib\": ", peak_mib, "}");
  } else {
    log_rank0(world, "bench ", o.config_name, " (", o.model.num_params() / 1e6, "M params) B=", o.B, " T=", o.T,
              " ranks=", world.world(), " device=", t.backend().name(), " recompute=", o.recompute.str(),
              " offload=", FsdpOptions::name(o.fsdp.offload));
    log_rank0(world, "ms_per_step ", med, " (min ", ms.front(), ", max ", ms.back(), ", ", ms.size(), " steps)");
    log_rank0(world, "tokens_per_s ", tps);
    log_rank0(world, "mfu ", 100 * mfu, "%");
    log_rank0(world, "peak_device_mib ", peak_mib);
  }
  return 0;
}

}  // namespace gpt
