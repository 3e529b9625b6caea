// The outer loop of `gpt train`: start-up report, per-step log line, metrics JSONL, periodic evaluation,
// sampling and checkpoints, and the final save/export.
#include <cmath>
#include <cstdio>

#include "src/core/check.h"
#ifdef GPT_WITH_CUDA
#include "src/backend/cuda/cuda_backend.h"
#endif
#include "src/train/trainer.h"
#include "src/util/log.h"
#include "src/util/progress.h"
#include "src/util/signals.h"
#include "src/util/trace.h"

namespace gpt {

static double mib(int64_t b) { return b / 1048576.0; }

// cuda: each rank's ledger (device total, of it the workspace) against the driver's count of device bytes
// the process took since the backend started (cudaMemGetInfo), collected on rank 0. One warning line when
// the driver counts more than allocation rounding (2 MiB per live block) plus an allowance for kernel code
// loaded on first launch explains; with NCCL its buffers are in the driver's figure, so only the difference
// is shown.
static void report_driver_memory(Communicator& world, Backend& be, bool nccl) {
#ifdef GPT_WITH_CUDA
  if (be.name() != "cuda") return;
  constexpr int64_t kCodeAllowance = int64_t{64} << 20;
  const CudaMemoryCheck m = cuda_memory_check(be);
  const int N = world.world();
  for (int r = 0; r < N; r++) {
    double v[4] = {(double)m.ledger_bytes, (double)be.ledger().current(MemDomain::device, MemCat::workspace),
                   (double)m.driver_bytes, (double)m.slack_bytes};
    if (N > 1)
      for (double& x : v) x = world.all_reduce_scalar(world.rank() == r ? x : 0.0, ReduceOp::sum);
    const int64_t ledger = (int64_t)v[0], driver = (int64_t)v[2], slack = (int64_t)v[3] + kCodeAllowance;
    log_rank0(world, "rank ", r, " device memory: ledger ", mib(ledger), " MiB (workspace ", mib((int64_t)v[1]),
              " MiB) | driver (cudaMemGetInfo, since backend start) ", mib(driver), " MiB | difference ",
              mib(driver - ledger), " MiB", nccl ? " (includes NCCL's buffers)" : "");
    if (!nccl && driver - ledger > slack)
      log_rank0(world, "warning: rank ", r, ": the driver counts ", mib(driver - ledger),
                " MiB more than the ledger, beyond the ", mib(slack),
                " MiB that allocation rounding and kernel code explain: memory outside the ledger (library "
                "buffers or another process on this GPU)");
  }
#endif
}

void Trainer::print_startup_report() {
  const GPTConfig& c = opt_.model;
  const Layout& layout = model_->layout();
  const int N = world_.world();
  log_rank0(world_, "model ", opt_.config_name, ": ", c.describe(), " | recompute ", opt_.recompute.str());
  log_rank0(world_, "backend ", be_->name(), " | ranks ", N, " | shard ", FsdpOptions::name(opt_.fsdp.strategy),
            " (group ", engine_->shard_group_size(), ") | offload ", FsdpOptions::name(opt_.fsdp.offload),
            " | gather slots ", opt_.fsdp.gather_slots, opt_.fsdp.no_sync ? " | no-sync" : "", " | reduce ",
            FsdpOptions::reduce_dtype_name(opt_.fsdp.reduce_dtype));
  log_rank0(world_, "MFU is measured against ", peak_flops_ / 1e12, " TFLOP/s per rank (",
            opt_.peak_tflops > 0 ? "--peak-tflops" : be_->name() == "cuda" ? "H100/H200 bf16 dense" : "this CPU's measured fp32 sgemm",
            ")");
  log_rank0(world_, "batch: B=", opt_.B, " T=", opt_.T, " x ", N, " ranks x ", accum_, " accumulation = ",
            opt_.total_batch, " tokens/step | lr ", opt_.lr, " warmup ", opt_.warmup, " | steps ", opt_.steps);
  // per-rank memory: each rank's ledger, collected on rank 0
  const MemoryLedger& led = be_->ledger();
  for (int r = 0; r < N; r++) {
    double v[4] = {(double)engine_->model_state_bytes(), (double)led.current(MemDomain::device, MemCat::gathered_param),
                   (double)led.current_total(MemDomain::device), (double)led.current_total(MemDomain::host)};
    if (N > 1)
      for (double& x : v) x = world_.all_reduce_scalar(world_.rank() == r ? x : 0.0, ReduceOp::sum);
    log_rank0(world_, "rank ", r, " memory: model states ", mib((int64_t)v[0]), " MiB | gather slots ",
              mib((int64_t)v[1]), " MiB | device total ", mib((int64_t)v[2]), " MiB | host total ",
              mib((int64_t)v[3]), " MiB (before activations)");
  }
  report_driver_memory(world_, *be_, device_comm_ != nullptr);
  const double psi = (double)layout.total_numel();
  const double f = N > 1 ? (double)(engine_->shard_group_size() - 1) / engine_->shard_group_size() : 0.0;
  const double gathers = opt_.fsdp.strategy == ShardStrategy::full ? 2.0 : 1.0;
  const double rs = (double)dtype_size(opt_.fsdp.reduce_dtype);  // gradient bytes per element on the wire
  if (opt_.fsdp.strategy == ShardStrategy::none)
    log_rank0(world_, "traffic per step per rank (predicted): all-reduce 2*Psi*(N-1)/N = ",
              mib((int64_t)(2 * psi * rs * (N - 1) / N)), " MiB");
  else
    log_rank0(world_, "traffic per micro-step per rank (predicted, ~): ", gathers, " all-gathers + 1 reduce-scatter of Psi*(G-1)/G = ",
              mib((int64_t)((gathers * be_->compute_size() + rs) * psi * f)), " MiB");
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
  const MemoryLedger& led = be_->ledger();
  const CommCounters cc = engine_->traffic_step();
  double peak = (double)led.peak_total(MemDomain::device), sent = (double)cc.total_sent();
  if (world_.world() > 1) {
    peak = world_.all_reduce_max(peak);
    sent = world_.all_reduce_max(sent);
  }
  if (!metrics_) return;
  std::fprintf(metrics_,
               "{\"step\": %lld, \"loss\": %.6f, \"lr\": %.6e, \"grad_norm\": %.6f, \"ms\": %.3f, \"tokens_per_s\": %.1f, "
               "\"mfu\": %.5f, \"skipped\": %s, \"rank0_model_state_bytes\": %lld, \"max_rank_device_peak_bytes\": %.0f, "
               "\"max_rank_bytes_sent\": %.0f",
               (long long)s.step, s.loss, s.lr, s.grad_norm, s.ms, s.tokens_per_s, s.mfu, s.skipped ? "true" : "false",
               (long long)engine_->model_state_bytes(), peak, sent);
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
    be_->ledger().reset_peaks();
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

}  // namespace gpt

#include "src/train/generate.h"

namespace gpt {

std::string Trainer::sample(const std::vector<int>& prompt, int tokens, float temperature, int top_k, float top_p) {
  SampleParams sp;
  sp.temperature = temperature;
  sp.top_k = top_k;
  sp.top_p = top_p;
  std::vector<int> ids = generate(*model_, *engine_, prompt, tokens, sp, progress_.rng);
  model_->release_activations();  // the training shape is re-created by the next step
  return tokenizer_ ? tokenizer_->decode(ids) : std::string();
}

}  // namespace gpt
