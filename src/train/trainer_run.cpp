// The outer loop of `gpt train`: start-up report, per-step log line, metrics JSONL, periodic evaluation,
// sampling and checkpoints, and the final save/export.
#include <cmath>
#include <cstdio>
#include <optional>

#include "src/core/check.h"
#include "src/fsdp/offload_set.h"
#include "src/sim/sim_step.h"
#include "src/train/generate.h"
#include "src/train/trainer.h"
#include "src/util/log.h"
#include "src/util/progress.h"
#include "src/util/signals.h"
#include "src/util/trace.h"
#include "src/util/watchdog.h"

namespace gpt {

static double mib(int64_t b) { return b / 1048576.0; }

// Rank r's values v (n), on every rank: scalar sums in which only rank r contributes. Collective.
static void values_of_rank(Communicator& world, int r, double* v, int n) {
  if (world.world() == 1) return;
  for (int i = 0; i < n; i++) v[i] = world.all_reduce_scalar(world.rank() == r ? v[i] : 0.0, ReduceOp::sum);
}

void Trainer::print_startup_report() {
  const GPTConfig& c = opt_.model;
  const int N = world_.world();
  log_rank0(world_, "model ", opt_.config_name, ": ", c.describe(), " | recompute ", opt_.recompute.str(),
            " | wrap ", opt_.wrap.str(), " (", engine_->num_units(), " units)");
  log_rank0(world_, "backend ", backend().name(), " | ranks ", N,
            opt_.tp.size > 1 ? str(" | tp ", opt_.tp.size, opt_.tp.sequence_parallel ? " (sequence parallel)" : "",
                                   " x dp ", N / opt_.tp.size)
                             : std::string(),
            " | shard ", FsdpOptions::name(opt_.fsdp.strategy),
            " (group ", engine_->shard_group_size(), ") | offload ", OffloadSet{opt_.fsdp.offload, opt_.offload_activations}.str(),
            " | gather slots ", opt_.fsdp.gather_slots, opt_.fsdp.no_sync ? " | no-sync" : "", " | reduce ",
            FsdpOptions::reduce_dtype_name(opt_.fsdp.reduce_dtype), " | attention ",
            attention_path_name(backend().attention_path()));
  log_rank0(world_, "MFU is measured against ", peak().flops / 1e12, " TFLOP/s per rank (", peak().source, ")");
  log_rank0(world_, "batch: B=", opt_.B, " T=", opt_.T, " x ", N, " ranks x ", accum_, " accumulation = ",
            opt_.total_batch, " tokens/step | lr ", opt_.lr, " warmup ", opt_.warmup, " | steps ", opt_.steps);
  report_memory();
  sim::SimRun run;  // the same step on the simulated machine: its communication ledger, without running it
  run.run = plan_input();
  run.grad_accum = accum_;
  log_rank0(world_, sim::traffic_line(sim::simulate_step(run), accum_));
}

// Each rank's ledger, collected on rank 0; then, where the backend has a driver to ask (cuda), each rank's
// ledger against the driver's count of device memory (the driver's figure includes NCCL's buffers when
// GPU ranks communicate, so only the difference is shown then).
void Trainer::report_memory() {
  const MemoryLedger& led = backend().ledger();
  const int N = world_.world();
  for (int r = 0; r < N; r++) {
    double v[4] = {(double)engine_->model_state_bytes(), (double)led.current(MemDomain::device, MemCat::gathered_param),
                   (double)led.current_total(MemDomain::device), (double)led.current_total(MemDomain::host)};
    values_of_rank(world_, r, v, 4);
    log_rank0(world_, "rank ", r, " memory: model states ", mib((int64_t)v[0]), " MiB | gather slots ",
              mib((int64_t)v[1]), " MiB | device total ", mib((int64_t)v[2]), " MiB | host total ",
              mib((int64_t)v[3]), " MiB (before activations)");
  }
  const std::optional<DriverMemory> mine = backend().device_info().driver_memory();
  if (!mine) return;  // every rank runs the same kind of backend: all return here, or none
  for (int r = 0; r < N; r++) {
    double v[4] = {(double)mine->ledger_bytes, (double)mine->workspace_bytes, (double)mine->driver_bytes,
                   (double)mine->explained_bytes};
    values_of_rank(world_, r, v, 4);
    DriverMemory m = *mine;
    m.ledger_bytes = (int64_t)v[0];
    m.workspace_bytes = (int64_t)v[1];
    m.driver_bytes = (int64_t)v[2];
    m.explained_bytes = (int64_t)v[3];
    for (const std::string& line : m.lines(r, rt_.comm_buffers_on_device())) log_rank0(world_, line);
  }
}

void Trainer::log_step(const StepStats& s) {
  if (opt_.quiet || world_.rank() != 0) return;
  const double remaining = (opt_.steps - s.step) * s.ms / 1e3;
  std::printf("step %5lld/%d | loss %.4f | lr %.2e | norm %.4f | %7.1f ms | %8.0f tok/s | MFU %5.1f%% | ETA %s%s\n",
              (long long)s.step, opt_.steps, s.loss, s.lr, s.grad_norm, s.ms, s.tokens_per_s, 100 * s.mfu,
              format_duration(remaining).c_str(), s.skipped ? " | SKIPPED (non-finite)" : "");
  std::fflush(stdout);
}

void Trainer::maybe_write_metrics(const StepStats& s, float val_loss) {
  // every rank contributes its memory peak and traffic; rank 0 writes
  const MemoryLedger& led = backend().ledger();
  const CommCounters cc = engine_->traffic_step();
  double peak = (double)led.peak_total(MemDomain::device), sent = (double)cc.total_sent();
  double tp_sent = mesh_.tp ? (double)mesh_.tp->ledger().step().total_sent() : 0;  // the model's, apart
  if (world_.world() > 1) {
    peak = world_.all_reduce_max(peak);
    sent = world_.all_reduce_max(sent);
    tp_sent = world_.all_reduce_max(tp_sent);
  }
  if (!metrics_) return;
  std::fprintf(metrics_,
               "{\"step\": %lld, \"loss\": %.6f, \"lr\": %.6e, \"grad_norm\": %.6f, \"ms\": %.3f, \"tokens_per_s\": %.1f, "
               "\"mfu\": %.5f, \"skipped\": %s, \"rank0_model_state_bytes\": %lld, \"max_rank_device_peak_bytes\": %.0f, "
               "\"max_rank_bytes_sent\": %.0f",
               (long long)s.step, s.loss, s.lr, s.grad_norm, s.ms, s.tokens_per_s, s.mfu, s.skipped ? "true" : "false",
               (long long)engine_->model_state_bytes(), peak, sent);
  if (mesh_.tp) std::fprintf(metrics_, ", \"max_rank_tp_bytes_sent\": %.0f", tp_sent);
  if (!std::isnan(val_loss)) std::fprintf(metrics_, ", \"val_loss\": %.6f", val_loss);
  std::fprintf(metrics_, "}\n");
  std::fflush(metrics_);
}

// Writes the trace (if any); a failure to write it is reported without failing the run.
void Trainer::finish_trace() {
  if (!trace::on()) return;
  try {
    trace::finish(world_);
    log_rank0(world_, "wrote trace ", opt_.trace_path);
  } catch (const Error& e) {
    std::fprintf(stderr, "error: --trace: %s (the training run itself completed)\n", e.what());
    trace::reset();
  }
}

// True on every rank when any rank received SIGINT/SIGTERM.
bool Trainer::stop_requested() {
  double mine = stop_signals_received() > 0 ? 1.0 : 0.0;
  return (world_.world() > 1 ? world_.all_reduce_max(mine) : mine) > 0;
}

void Trainer::run() {
  install_stop_handlers();
  print_startup_report();
  const int64_t first = progress_.step;
  float val = NAN;
  for (int64_t i = first; i < opt_.steps; i++) {
    engine_->begin_traffic_step();
    if (mesh_.tp) mesh_.tp->ledger().begin_step();
    backend().ledger().reset_peaks();
    watchdog::at_step(i + 1);
    StepStats s = step();
    log_step(s);
    val = NAN;
    const bool last = s.step == opt_.steps;
    if (!opt_.val_pattern.empty() && ((opt_.val_every > 0 && s.step % opt_.val_every == 0) || last)) {
      val = evaluate(opt_.val_batches);
      log_rank0(world_, "step ", s.step, " | val_loss ", val);
    }
    maybe_write_metrics(s, val);
    if (tokenizer_ && ((opt_.sample_every > 0 && s.step % opt_.sample_every == 0) || (last && opt_.sample_tokens > 0))) {
      std::string text = sample({tokenizer_->eot_token()}, opt_.sample_tokens, opt_.sample_temperature, opt_.sample_top_k, 1.0f);
      log_rank0(world_, "---- sample at step ", s.step, " ----\n", text, "\n----");
    }
    const bool stop = stop_requested();
    if (!opt_.out_dir.empty() && ((opt_.save_every > 0 && s.step % opt_.save_every == 0) || last || stop)) save();
    if (stop) {
      log_rank0(world_, "stop signal: finished step ", s.step,
                opt_.out_dir.empty() ? " (no --out: nothing saved)" : ", checkpoint written; continue with --resume");
      finish_trace();
      return;
    }
  }
  finish_trace();
  if (!opt_.out_dir.empty()) {
    export_model(opt_.out_dir + "/model.bin");
    log_rank0(world_, "wrote ", opt_.out_dir, "/model.bin");
  }
}

std::string Trainer::sample(const std::vector<int>& prompt, int tokens, float temperature, int top_k, float top_p) {
  SampleParams sp;
  sp.temperature = temperature;
  sp.top_k = top_k;
  sp.top_p = top_p;
  model_->release_activations();  // room for the key/value cache; the next step re-creates the training shape
  std::vector<int> ids = generate(*model_, *engine_, prompt, tokens, sp, progress_.rng);
  return tokenizer_ ? tokenizer_->decode(ids) : std::string();
}

}  // namespace gpt
