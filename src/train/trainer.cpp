// The training loop (see trainer.h). Construction is a sequence of small named steps: check the batch,
// make the runtime (backend and the engine's communicator, src/runtime), model and FSDP engine, data,
// tokenizer, schedule, the starting parameters (checkpoint > --init-from > deterministic init), and the
// instruments (trace, MFU peak, metrics). step() is one optimizer step.
#include "src/train/trainer.h"

#include <cmath>
#include <filesystem>

#include "src/core/check.h"
#include "src/dist/collective_check.h"
#include "src/fsdp/make_engine.h"
#include "src/io/atomic_file.h"
#include "src/io/model_file.h"
#include "src/runtime/preflight_run.h"
#include "src/train/config_hash.h"
#include "src/train/train_step.h"
#include "src/train/whole_model.h"
#include "src/util/log.h"
#include "src/util/trace.h"

namespace gpt {

Trainer::Trainer(const TrainOptions& opt, Communicator& world) : opt_(opt), world_(world) {
  check_batch();
  rt_ = make_runtime(world_, opt_.device, opt_.attention, opt_.model.channels, opt_.model.num_heads);
  open_data();       // bad input is reported before anything else is printed
  check_output_paths();
  load_tokenizer();
  find_checkpoint();
  preflight(world_, backend(), plan_input(), opt_.command, opt_.no_preflight, !opt_.quiet);
  make_model_and_engine();
  set_schedule();
  init_params();
  start_instruments();
}

void Trainer::check_batch() {
  const GPTConfig& cfg = opt_.model;
  GPT_CHECK(opt_.B >= 1 && opt_.T >= 1, "-B and -T must be >= 1 (got ", opt_.B, ", ", opt_.T, ")");
  GPT_CHECK(opt_.T <= cfg.max_seq_len, "-T ", opt_.T, " exceeds --seq-len ", cfg.max_seq_len);
  check_tp_run(opt_.tp, cfg, world_.world(), opt_.B, opt_.T, "the world size");
  // the ranks of a tensor-parallel group share their sequences: a micro-step takes B per data-parallel rank
  const int64_t micro_tokens = (int64_t)opt_.B * opt_.T * dp_size();
  if (opt_.total_batch == 0) opt_.total_batch = micro_tokens;
  GPT_CHECK(opt_.total_batch % micro_tokens == 0, "--total-batch ", opt_.total_batch, " must be a multiple of B*T*",
            opt_.tp.size > 1 ? "data-parallel ranks = " : "ranks = ", micro_tokens);
  accum_ = (int)(opt_.total_batch / micro_tokens);
  collective_check(world_, "start-up", [&] { check_same_config_on_all_ranks(world_, opt_); });
}

// The run as the memory planner sees it (what `gpt memplan` would be given for it).
MemPlanInput Trainer::plan_input() {
  MemPlanInput in;
  in.cfg = opt_.model;
  in.world = world_.world();
  in.tp = opt_.tp;
  in.fsdp = opt_.fsdp;
  in.recompute = opt_.recompute;
  in.wrap = opt_.wrap;
  in.offload_activations = opt_.offload_activations;
  in.B = opt_.B;
  in.T = opt_.T;
  in.compute = backend().compute_dtype();
  // The path make_runtime resolved. On cudnn the plans' workspace is not measured here (reserve_workspace
  // builds the plans after the pre-flight): it counts as 0 and is left to the pre-flight's margin (256 MiB
  // and 5%; cuDNN's deviceless planning asks at most 3 MiB at d12, tests/cuda/test_cuda_cudnn_graphs.cpp).
  in.attention = backend().attention_path();
  return in;
}

// With --tp > 1 the mesh first: the model issues its tensor-parallel collectives on the TP group, and the
// engine shards over the data-parallel one.
void Trainer::make_model_and_engine() {
  if (opt_.tp.size > 1) {
    mesh_ = make_mesh(*rt_.engine_comm, opt_.tp.size);
    tp_ = std::make_unique<TensorParallel>(*mesh_.tp, opt_.tp.sequence_parallel, backend().compute_dtype());
  }
  model_ = std::make_unique<GPT>(backend(), opt_.model, opt_.recompute, opt_.wrap, opt_.offload_activations, tp_.get());
  engine_ = make_engine(backend(), mesh_.dp ? *mesh_.dp : *rt_.engine_comm, model_->layout(), opt_.fsdp);
  model_->reserve_workspace(opt_.B, opt_.T);  // op scratch, before step 1 (the start-up report shows it)
}

void Trainer::open_data() {
  inputs_.resize((size_t)opt_.B * opt_.T);
  targets_.resize(inputs_.size());
  auto open = [&](const std::string& pattern, const char* flag) {
    std::unique_ptr<DataLoader> loader;
    try {
      // each data-parallel rank its own rows; the ranks of a tensor-parallel group the same ones
      loader = std::make_unique<DataLoader>(pattern, opt_.B, opt_.T, dp_rank(), dp_size(), opt_.model.vocab_size);
    } catch (const Error& e) {
      fail(flag, ": ", e.what());
    }
    return loader;
  };
  if (!opt_.train_pattern.empty())
    collective_check(world_, "training data", [&] { train_loader_ = open(opt_.train_pattern, "--train"); });
  if (opt_.val_pattern.empty()) return;
  collective_check(world_, "validation data", [&] {  // checked now, not at the first evaluation hours later
    val_loader_ = open(opt_.val_pattern, "--val");
    val_loader_->check_batches(opt_.val_batches, "--val-batches");
  });
}

// --trace and --metrics are written during and after the run: a path that cannot be written stops it now,
// on every rank together (the path may be missing on one node only).
void Trainer::check_output_paths() {
  collective_check(world_, "output paths", [&] {
    if (!opt_.trace_path.empty()) check_writable("--trace", opt_.trace_path);
    if (!opt_.metrics_path.empty() && world_.rank() == 0) check_writable("--metrics", opt_.metrics_path);
  });
}

void Trainer::load_tokenizer() {
  std::string tk = opt_.tokenizer;
  const int V = opt_.model.vocab_size;
  if (tk == "auto") tk = V == 257 ? "byte" : V == 50257 ? "gpt2" : "";
  if (tk == "none") tk.clear();  // no samples (tests, bench)
  if (!tk.empty()) collective_check(world_, "tokenizer", [&] { tokenizer_ = make_tokenizer(tk, opt_.data_dir); });
}

void Trainer::set_schedule() {
  lr_.peak = opt_.lr;
  lr_.warmup = opt_.warmup;
  lr_.total = opt_.steps;
  lr_.min_lr_frac = opt_.min_lr_frac;
  progress_.rng.reseed(opt_.seed);
}

void Trainer::start_instruments() {
  if (!opt_.trace_path.empty()) trace::start(opt_.trace_path, world_.rank());  // writable: check_output_paths
  collective_check(world_, "MFU peak", [&] {  // a corrupt peak cache on one node stops every rank
    mfu_ = make_mfu_meter(backend(), opt_.peak_tflops, [rank = world_.rank(), n = world_.world()](const std::string& l) {
      std::fprintf(stderr, "%s%s\n", n > 1 ? str("rank ", rank, ": ").c_str() : "", l.c_str());
      std::fflush(stderr);
    });
  });
  if (!opt_.metrics_path.empty() && world_.rank() == 0) {
    metrics_ = std::fopen(opt_.metrics_path.c_str(), progress_.step > 0 ? "a" : "w");
    GPT_CHECK(metrics_, "--metrics: cannot open ", opt_.metrics_path, " for writing");
  }
}

Trainer::~Trainer() {
  if (metrics_) std::fclose(metrics_);
}

// --resume: the newest complete checkpoint, verified (checksums, headers, config) before anything is allocated.
void Trainer::find_checkpoint() {
  if (!opt_.resume) return;
  GPT_CHECK(!opt_.out_dir.empty(), "--resume needs --out RUN_DIR");
  resume_from_ = find_latest_checkpoint(opt_.out_dir);
  if (!resume_from_.empty()) verify_checkpoint(resume_from_, world_, opt_.model);
}

void Trainer::init_params() {
  const Layout& layout = model_->layout();
  if (!resume_from_.empty()) {
    progress_ = load_checkpoint(resume_from_, *engine_, /*verify=*/false, &world_);
    if (train_loader_) train_loader_->set_position(progress_.data);
    log_rank0(world_, "resumed from ", resume_from_, " at step ", progress_.step,
              progress_.saved_wrap != opt_.wrap.str()
                  ? str(" (saved under --wrap ", progress_.saved_wrap, ", resharded to --wrap ", opt_.wrap.str(), ")")
                  : std::string(),
              progress_.saved_tp != opt_.tp.size
                  ? str(" (saved at --tp ", progress_.saved_tp, ", resharded to --tp ", opt_.tp.size, ")")
                  : std::string());
    return;
  }
  ModelWeights w;
  if (!opt_.init_from.empty()) {
    collective_check(world_, "--init-from", [&] {
      w = load_model_file(opt_.init_from);
      GPT_CHECK(w.config == layout.config(), "--init-from ", opt_.init_from, ": model is ", w.config.describe(),
                " but the run is ", layout.config().describe());
    });
  }
  const Layout file_layout(layout.config());  // a model file's units are the default layout's
  std::vector<const float*> file_units;  // [unit of file_layout] -> its numel floats in w
  for (const std::vector<float>& u : w.units) file_units.push_back(u.data());
  // With tensor parallelism this rank's slices are cut from the whole units the model would have without it
  // (same wrap, so unit u holds the same blocks), which init_unit draws the same way whatever the split.
  const Layout whole(layout.config(), layout.wrap());
  std::vector<float> full, slice;  // (numel of unit u) fp32: the whole unit; this rank's slice of it
  for (int u = 0; u < layout.num_units(); u++) {
    full.assign((size_t)whole.unit(u).numel, 0.0f);
    if (!w.units.empty()) {
      copy_unit(whole, u, file_layout, file_units, full.data());
    } else {
      GPT::init_unit(whole, u, opt_.seed, full.data(), opt_.init);
    }
    if (layout.tp().size > 1) {
      std::vector<const float*> src((size_t)whole.num_units(), nullptr);
      src[(size_t)u] = full.data();
      slice.assign((size_t)layout.unit(u).numel, 0.0f);
      copy_unit(layout, u, whole, src, slice.data());
      full.swap(slice);
    }
    engine_->set_unit_from_host(u, full.data());
  }
}

double Trainer::flops_per_token() const {
  const GPTConfig& c = opt_.model;
  const double n = (double)(c.num_params() - (int64_t)c.max_seq_len * c.channels);
  return 6.0 * n + 12.0 * c.num_layers * c.channels * opt_.T;
}

StepStats Trainer::step() {
  GPT_CHECK(train_loader_, "train: --train data is required");
  const auto t0 = now_seconds();
  TrainStepSpec spec;
  spec.B = opt_.B;
  spec.T = opt_.T;
  spec.accum = accum_;
  spec.lr = lr_.at((int)progress_.step);
  // A skipped step leaves AdamW's count where it is, as a skipped optimizer.step() leaves PyTorch's: the
  // bias corrections 1 - beta^t follow the updates applied, not the steps taken (the schedule follows those).
  spec.update = (int)progress_.updates + 1;
  spec.optim = opt_.optim;
  spec.poison_loss = inject_nan_;
  inject_nan_ = false;
  const TrainStepResult r = run_train_step(*model_, *engine_, *engine_, world_, spec,
                                           [&](int* in, int* tg) { train_loader_->next_batch(in, tg); });
  StepStats s;
  s.loss = r.loss;
  s.grad_norm = r.grad_norm;
  s.skipped = r.skipped;
  s.step = progress_.step + 1;
  s.lr = spec.lr;
  if (r.skipped) {
    progress_.bad_steps++;
    GPT_CHECK(progress_.bad_steps < opt_.max_bad_steps, "stopping: ", progress_.bad_steps,
              " consecutive steps with a non-finite loss or gradient norm (--max-bad-steps ", opt_.max_bad_steps, ")");
  } else {
    progress_.bad_steps = 0;
    progress_.updates++;
  }
  progress_.step++;
  progress_.data = train_loader_->position();
  s.ms = (now_seconds() - t0) * 1e3;
  s.tokens_per_s = (double)opt_.total_batch / (s.ms / 1e3);
  s.mfu = mfu_at(s.tokens_per_s);
  return s;
}

double Trainer::mfu_at(double tokens_per_s) { return mfu_.mfu(tokens_per_s * flops_per_token() / world_.world()); }

float Trainer::evaluate(int batches) {
  GPT_CHECK(val_loader_, "eval: --val data is required");
  val_loader_->reset();
  double sum = 0;
  for (int i = 0; i < batches; i++) {
    val_loader_->next_batch(inputs_.data(), targets_.data());
    sum += model_->forward(inputs_.data(), targets_.data(), opt_.B, opt_.T, *engine_);
  }
  const double mean = sum / batches;
  return (float)(world_.world() > 1 ? world_.all_reduce_scalar(mean, ReduceOp::avg) : mean);
}

void Trainer::save() {
  GPT_CHECK(!opt_.out_dir.empty(), "save: --out RUN_DIR is required");
  save_checkpoint(opt_.out_dir, *engine_, progress_, opt_.keep, &world_);
}

void Trainer::export_model(const std::string& path) {
  const std::vector<std::vector<float>> units = whole_model_units(backend(), *engine_, *model_);
  const Layout whole(model_->layout().config(), model_->layout().wrap());
  collective_check(world_, "export", [&] {
    if (world_.rank() != 0) return;
    std::vector<const float*> ptrs;
    for (auto& u : units) ptrs.push_back(u.data());
    save_model_file(path, whole, ptrs);
  });
}

}  // namespace gpt
