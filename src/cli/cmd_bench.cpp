// `gpt bench`: times training steps on random tokens or --train's shards (ms/step, tokens/s, MFU, peak memory), compares the
// memory levers against a baseline (--compare-levers), and runs the micro-benchmarks of bench_micro.h
// (--adamw, --encode). Benchmarks live here and in scripts, never as timed assertions in tests.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <vector>

#include "kernels/attention_rules.h"
#include "src/cli/abort_peers.h"
#include "src/cli/bench_micro.h"
#include "src/cli/calibrate.h"
#include "src/cli/plan_auto.h"
#include "src/cli/commands.h"
#include "src/cli/train_flags.h"
#include "src/core/check.h"
#include "src/core/rng.h"
#include "src/dist/collective_check.h"
#include "src/fsdp/offload_set.h"
#include "src/io/data_loader.h"
#include "src/io/json_min.h"
#include "src/runtime/runtime.h"
#include "src/train/trainer.h"
#include "src/util/log.h"
#include "src/util/paths.h"

namespace gpt {

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

struct BenchResult {
  double ms = 0, tokens_per_s = 0, mfu = 0, peak_device_mib = 0, peak_host_mib = 0;
  int64_t peak_device_bytes = 0, peak_host_bytes = 0;  // the ledger's peaks, exact (what memplan predicts)
  int steps = 0;
  double ms_min = 0, ms_max = 0;
  std::string attention;  // the attention path that ran (--attention auto resolved)
  PeakFlops peak;         // per rank: MFU's denominator and where it comes from (names the CPU or GPU)
};

// Runs 1 warm-up step + o.steps timed steps; median step time.
static BenchResult bench_steps(TrainOptions o, Communicator& world, std::unique_ptr<Trainer>& holder) {
  const int warm = 1;
  o.steps += warm;
  o.quiet = true;
  holder = std::make_unique<Trainer>(o, world);
  Trainer& t = *holder;
  std::vector<double> ms;
  for (int i = 0; i < o.steps; i++) {
    t.backend().ledger().reset_peaks();
    StepStats s = t.step();
    if (i >= warm) ms.push_back(s.ms);
  }
  std::sort(ms.begin(), ms.end());
  BenchResult r;
  r.steps = (int)ms.size();
  r.ms = ms[ms.size() / 2];
  r.ms_min = ms.front();
  r.ms_max = ms.back();
  r.tokens_per_s = t.options().total_batch / (r.ms / 1e3);
  r.mfu = t.mfu_at(r.tokens_per_s);  // the median step: at most the fastest, which the peak already covers
  r.peak_device_bytes = t.backend().ledger().peak_total(MemDomain::device);
  r.peak_host_bytes = t.backend().ledger().peak_total(MemDomain::host);
  r.peak_device_mib = r.peak_device_bytes / 1048576.0;
  r.peak_host_mib = r.peak_host_bytes / 1048576.0;
  r.attention = attention_path_name(t.backend().attention_path());
  r.peak = t.peak();
  return r;
}

// bench_steps, ending the job at once when it fails on one of several ranks (abort_peers.h).
static BenchResult bench_once(const TrainOptions& o, Communicator& world) {
  std::unique_ptr<Trainer> t;  // held here: a rank failing with peers aborts the job before it is destroyed
  BenchResult r;
  run_or_abort_peers(world, [&] { r = bench_steps(o, world, t); });
  return r;
}

// --compare-levers: the cost of each memory lever as time and memory ratios against the baseline.
static void compare_levers(const TrainOptions& base, Communicator& world, bool json) {
  struct Lever { const char* name; const char* recompute; OffloadMode offload; };
  const Lever levers[] = {{"baseline", "none", OffloadMode::none},          {"recompute full", "full", OffloadMode::none},
                          {"recompute every:2", "every:2", OffloadMode::none}, {"recompute selective", "selective", OffloadMode::none},
                          {"offload optimizer", "none", OffloadMode::optimizer}, {"offload params", "none", OffloadMode::params}};
  BenchResult ref;
  for (const Lever& l : levers) {
    TrainOptions o = base;
    o.recompute = RecomputePolicy::parse(l.recompute);
    o.fsdp.offload = l.offload;
    BenchResult r = bench_once(o, world);
    if (std::string(l.name) == "baseline") ref = r;
    if (json)
      log_rank0(world, "{\"lever\": \"", l.name, "\", \"ms_per_step\": ", r.ms, ", \"time_ratio\": ", r.ms / ref.ms,
                ", \"peak_device_mib\": ", r.peak_device_mib, ", \"peak_host_mib\": ", r.peak_host_mib,
                ", \"device_memory_ratio\": ", r.peak_device_mib / ref.peak_device_mib, "}");
    else
      log_rank0(world, l.name, ": ", r.ms, " ms/step (x", r.ms / ref.ms, " time) | device peak ", r.peak_device_mib,
                " MiB (x", r.peak_device_mib / ref.peak_device_mib, ") | host peak ", r.peak_host_mib, " MiB");
  }
}

// bench times Trainer::step on random tokens (or --train's shards): the run loop's evaluations, samples, files
// and trace never happen, so asking for them is an error rather than a silent no-op.
static void refuse_run_loop_flags(const Flags& f) {
  for (const char* flag : {"--val", "--val-every", "--val-batches", "--sample-every", "--sample-tokens",
                           "--temperature", "--top-k", "--save-every", "--keep", "--out", "--resume", "--metrics",
                           "--trace"})
    GPT_CHECK(!f.has(flag), "gpt bench: ", flag, " has no effect here (bench times steps on random tokens)");
}

int cmd_bench(int argc, char** argv, Communicator& world) {
  Flags f("bench", argc, argv, {"--resume", "--no-sync", "--quiet", "--json", "--compare-levers", "--no-preflight", "--calibrate", "--quick"});
  if (f.help()) {
    std::printf("usage: gpt bench --config d12 -B 4 -T 64 [--steps N] [--json] [--compare-levers] [train flags]\n"
                "Times training steps on random tokens: ms/step (median), tokens/s, MFU, peak memory.\n"
                "--compare-levers times baseline, recompute full/every:2/selective and offload optimizer/params\n"
                "and prints each one's time and memory ratio against the baseline.\n"
                "--train GLOB times on these shards instead; the model's vocabulary follows their tokenizer record\n"
                "gpt bench --adamw N: host AdamW over N params against the memory-bandwidth limit\n"
                "gpt bench --encode FILE: GPT-2 tokenizer encode MB/s (cold and warm cache)\n"
                "gpt bench --calibrate --out FILE [--quick]: measure this machine into a hardware file for\n"
                "  gpt memplan --time (sgemm, streaming and copy rates; run it without mpirun first, then with\n"
                "  mpirun -n R for each rank count R: that adds R ranks' rates and MPI collective fits); it also\n"
                "  measures the peak for MFU and caches it (below)\n"
                "MFU's peak on the CPU is a measured rate: the best 768^3 fp32 sgemm of bursts spread over ~0.8 s by\n"
                "  doubling pauses at start-up (a slow instant of the host decides it only if it lasts the whole\n"
                "  span), or the calibration of gpt bench --calibrate (~5.7 s span) cached in cpu_peak.json under\n"
                "  $GPT_CACHE_DIR, else $XDG_CACHE_HOME/gpt, else ~/.cache/gpt, per CPU model, OpenBLAS threads\n"
                "  and OpenBLAS kernels (OPENBLAS_CORETYPE or what OpenBLAS picked); rerun --calibrate to refresh\n"
                "  it, delete the file to forget it; a corrupt file is an error naming it. --peak-tflops overrides.\n"
                "  A step faster than the peak has it measured again (one line on stderr) and, if the step is\n"
                "  still faster, the step's own rate is the peak from then on: the highest rate measured on this\n"
                "  machine, so MFU never reads above 100%%\n%s%s",
                kModelFlagsHelp, kTrainFlagsHelp);
    return 0;
  }
  if (f.on("--calibrate")) {  // a hardware file for the time model
    const std::string out = f.str("--out", "");
    const bool quick = f.on("--quick"), json = f.on("--json");
    f.finish();
    run_calibration(world, out, quick, json);
    return 0;
  }
  if (f.has("--adamw")) {  // micro-benchmark: host AdamW vs memory bandwidth
    const int64_t n = f.i64("--adamw", 0, 1024, (int64_t)1 << 34);
    const bool json = f.on("--json");
    f.finish();
    bench_host_adamw(n, 5, json);
    return 0;
  }
  if (f.has("--encode")) {  // micro-benchmark: GPT-2 tokenizer
    const std::string path = f.str("--encode", ""), dir = f.str("--data-dir", default_data_dir());
    const bool json = f.on("--json");
    f.finish();
    bench_encode(path, dir, json);
    return 0;
  }
  TrainOptions o = parse_train_flags(f, "d12");
  refuse_run_loop_flags(f);
  o.command = "bench";
  if (!f.has("--steps")) o.steps = 5;
  if (!f.has("--tokenizer")) o.tokenizer = "none";
  const bool json = f.on("--json"), levers = f.on("--compare-levers");
  const bool plan = plan_auto_requested(f);
  f.finish();
  GPT_CHECK(o.steps >= 1, "--steps must be >= 1 for bench");
  if (plan) apply_plan_auto(f, o, world);
  if (o.train_pattern.empty()) {  // random tokens
    collective_check(world, "bench data", [&] {
      if (world.rank() == 0) o.train_pattern = make_bench_shard(o, world.world(), o.steps + 1);
    });
    world.barrier();
    if (world.rank() != 0) o.train_pattern = make_bench_shard(o, world.world(), o.steps + 1);
  }
  if (levers) {
    compare_levers(o, world, json);
    return 0;
  }
  BenchResult r = bench_once(o, world);
  const std::string dev = device_kind_name(resolve_device(o.device));
  if (json) {
    log_rank0(world, "{\"config\": \"", o.config_name, "\", \"params\": ", o.model.num_params(), ", \"B\": ", o.B,
              ", \"T\": ", o.T, ", \"ranks\": ", world.world(), ", \"device\": \"", dev, "\", \"recompute\": \"",
              o.recompute.str(), "\", \"offload\": \"", OffloadSet{o.fsdp.offload, o.offload_activations}.str(), "\", \"shard\": \"",
              FsdpOptions::name(o.fsdp.strategy), "\", \"attention\": \"", r.attention, "\", \"ms_per_step\": ", r.ms,
              ", \"tokens_per_s\": ", r.tokens_per_s, ", \"mfu\": ", r.mfu, ", \"peak_device_mib\": ", r.peak_device_mib,
              ", \"peak_host_mib\": ", r.peak_host_mib, ", \"peak_device_bytes\": ", r.peak_device_bytes,
              ", \"peak_host_bytes\": ", r.peak_host_bytes, ", \"peak_tflops_per_rank\": ", r.peak.flops / 1e12,
              ", \"peak_source\": ", json_quote(r.peak.source), "}");
  } else {
    log_rank0(world, "bench ", o.config_name, " (", o.model.num_params() / 1e6, "M params) B=", o.B, " T=", o.T,
              " ranks=", world.world(), " device=", dev, " recompute=", o.recompute.str(), " offload=",
              OffloadSet{o.fsdp.offload, o.offload_activations}.str(), " attention=", r.attention);
    log_rank0(world, "ms_per_step ", r.ms, " (min ", r.ms_min, ", max ", r.ms_max, ", ", r.steps, " steps)");
    log_rank0(world, "tokens_per_s ", r.tokens_per_s);
    log_rank0(world, "mfu ", 100 * r.mfu, "% of ", r.peak.flops / 1e12, " TFLOP/s per rank (", r.peak.source, ")");
    log_rank0(world, "peak_device_mib ", r.peak_device_mib);
  }
  return 0;
}

}  // namespace gpt
