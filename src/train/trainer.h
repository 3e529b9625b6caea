// The training loop: data -> micro-steps (forward, backward, reduce) -> global grad norm -> clip ->
// AdamW on shards -> log / evaluate / sample / checkpoint. Every rank runs the same loop; the engine
// hides who owns what. Also the pieces that `gpt bench`, `gpt eval`, `gpt sample` and the tests use.
#pragma once
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "src/dist/communicator.h"
#include "src/dist/mesh.h"
#include "src/fsdp/sharding_engine.h"
#include "src/io/data_loader.h"
#include "src/io/tokenizer.h"
#include "src/model/gpt.h"
#include "src/plan/memplan.h"
#include "src/runtime/runtime.h"
#include "src/train/checkpoint.h"
#include "src/train/lr_schedule.h"
#include "src/train/train_options.h"

namespace gpt {

struct StepStats {
  int64_t step = 0;        // 1-based index of the step just taken
  float loss = 0;          // mean over the global batch
  float lr = 0;
  double grad_norm = 0;    // before clipping
  double ms = 0;           // wall time of the step
  double tokens_per_s = 0; // global tokens / s
  double mfu = 0;          // model FLOPs utilisation against peak_flops() (fraction)
  bool skipped = false;    // non-finite loss or grad norm: no update applied
};

class Trainer {
 public:
  Trainer(const TrainOptions& opt, Communicator& world);
  ~Trainer();

  void run();                     // the whole `gpt train`
  StepStats step();               // one optimizer step
  float evaluate(int batches);    // mean validation loss (all ranks agree)
  std::string sample(const std::vector<int>& prompt, int tokens, float temperature, int top_k, float top_p);
  void save();                    // checkpoint now (collective)
  void export_model(const std::string& path);  // llm.c model file (collective; rank 0 writes)

  ShardingEngine& engine() { return *engine_; }
  GPT& model() { return *model_; }
  Backend& backend() { return *rt_.backend; }
  const TrainOptions& options() const { return opt_; }
  const TrainProgress& progress() const { return progress_; }
  double flops_per_token() const;
  double peak_flops() const { return mfu_.peak().flops; }  // per rank, for MFU
  const PeakFlops& peak() const { return mfu_.peak(); }    // that peak and where it comes from
  // MFU of a run at `tokens_per_s` (all ranks): the one formula (flops_per_token per token, against the
  // peak per rank) and the one rule that keeps the peak at or above every measured rate (mfu_meter.h).
  double mfu_at(double tokens_per_s);
  // Test hook: make the next step's loss non-finite (exercises the NaN guard).
  void inject_nonfinite_once() { inject_nan_ = true; }

 private:
  // construction, in order (trainer.cpp)
  void check_batch();           // -B, -T, --total-batch, --tp -> accum_; the same options on every rank
  int dp_size() const { return world_.world() / opt_.tp.size; }  // data-parallel ranks: sequences per micro-step
  int dp_rank() const { return world_.rank() / opt_.tp.size; }
  MemPlanInput plan_input();
  void find_checkpoint();
  void make_model_and_engine();
  void open_data();             // --train's loader and the host staging buffers
  void load_tokenizer();        // for samples: --tokenizer, or by vocabulary size
  void set_schedule();          // the learning-rate schedule and the sampling RNG
  void init_params();           // checkpoint > --init-from > deterministic init
  void start_instruments();     // --trace, the MFU peak, --metrics
  // the outer loop's pieces (trainer_run.cpp)
  bool stop_requested();
  void finish_trace();
  void print_startup_report();
  void check_output_paths();
  void report_memory();
  void log_step(const StepStats& s);
  void maybe_write_metrics(const StepStats& s, float val_loss);

  TrainOptions opt_;
  Communicator& world_;
  Runtime rt_;  // the backend and the engine's communicator (destroyed after the model and the engine)
  Mesh mesh_;   // --tp > 1: the tensor- and data-parallel groups over rt_'s communicator (dist/mesh.h)
  std::unique_ptr<TensorParallel> tp_;  // --tp > 1: the model's view of its tensor-parallel group
  std::unique_ptr<GPT> model_;
  std::unique_ptr<ShardingEngine> engine_;
  std::unique_ptr<DataLoader> train_loader_;
  std::unique_ptr<DataLoader> val_loader_;  // --val, opened and checked at start; each evaluation starts at 0
  std::unique_ptr<Tokenizer> tokenizer_;
  LrSchedule lr_;
  std::string resume_from_;  // --resume: the verified checkpoint directory, or ""
  TrainProgress progress_;
  int accum_ = 1;  // gradient accumulation: micro-steps per optimizer step
  MfuMeter mfu_;  // the peak, set in start_instruments
  std::vector<int> inputs_, targets_;  // (B*T) host staging
  FILE* metrics_ = nullptr;
  bool inject_nan_ = false;
};

}  // namespace gpt
