// Everything `gpt train` (and `gpt bench`) can be told, one documented field per flag. Parsed and
// validated in cli/train_flags.cpp.
#pragma once
#include <cstdint>
#include <string>

#include "src/fsdp/options.h"
#include "src/model/config.h"
#include "src/model/init_rule.h"
#include "src/model/recompute.h"
#include "src/model/tp_shape.h"
#include "src/model/wrap.h"
#include "src/train/optimizer.h"

namespace gpt {

struct TrainOptions {
  GPTConfig model;                 // --config dN or --n-layer/--n-head/--d-model/--seq-len/--vocab
  std::string config_name = "d6";  // preset name, or "custom"
  std::string train_pattern;       // --train: glob of training shards
  std::string val_pattern;         // --val: glob of validation shards (optional)
  int B = 4;                       // -B: per-rank micro-batch (sequences)
  int T = 64;                      // -T: sequence length of a batch (<= model seq-len)
  int64_t total_batch = 0;         // --total-batch: global batch in tokens (default B*T*ranks)
  int steps = 100;                 // --steps: optimizer steps to run (total, including resumed ones)
  float lr = 6e-4f;                // --lr: peak learning rate
  float min_lr_frac = 0.1f;        // --min-lr-frac: final rate as a fraction of --lr (cosine decay)
  int warmup = 0;                  // --warmup: linear warmup steps
  OptimizerConfig optim;           // --weight-decay, --grad-clip, --beta1, --beta2 (eps 1e-8)
  uint64_t seed = 1337;            // --seed: init and sampling
  InitRule init = InitRule::gpt2;  // --init gpt2|width: the std of the weight matrices (model/init_rule.h)
  std::string device = "auto";     // --device cpu|cuda|auto
  std::string attention = "auto";  // --attention auto|simple|fused|cudnn (kernels/attention_rules.h)
  FsdpOptions fsdp;                // --shard, --shard-group, --gather-slots, --no-sync, --offload
  TpOptions tp;                    // --tp, --sequence-parallel: the mesh is (world / tp.size) x tp.size
  RecomputePolicy recompute;       // --recompute
  WrapPolicy wrap;                 // --wrap: which blocks form one sharding unit (model/wrap.h)
  bool offload_activations = false;  // --offload ...,activations: kept activations in host memory
  int val_every = 0;               // --val-every: evaluate every N steps (0: only at the end)
  int val_batches = 8;             // --val-batches: batches per evaluation
  int sample_every = 0;            // --sample-every: print a sample every N steps (0: only at the end)
  int sample_tokens = 64;          // --sample-tokens: tokens per sample
  float sample_temperature = 1.0f; // --temperature: sampling temperature for the samples (0 = greedy)
  int sample_top_k = 0;            // --top-k: keep the k most likely tokens when sampling (0 = all)
  std::string tokenizer = "auto";  // --tokenizer byte|gpt2|auto (by vocab size) for decoding samples
  std::string data_dir = "data";   // --data-dir: where gpt2/ tokenizer files live
  std::string out_dir;             // --out: run directory (checkpoints, model.bin, metrics)
  int save_every = 0;              // --save-every: checkpoint every N steps (0: only at the end)
  int keep = 2;                    // --keep: complete checkpoints to keep
  bool resume = false;             // --resume: continue from the newest complete checkpoint in --out
  std::string init_from;           // --init-from: llm.c model file to start from
  std::string metrics_path;        // --metrics: JSONL, one object per step
  std::string trace_path;          // --trace: Chrome/Perfetto JSON timeline
  double peak_tflops = 0;          // --peak-tflops: for MFU (default: Backend::peak_flops)
  int max_bad_steps = 10;          // --max-bad-steps: consecutive non-finite steps before stopping
  bool quiet = false;              // --quiet: no per-step lines (bench)
  std::string command = "train";   // the command running (messages): train or bench
  bool no_preflight = false;
  double timeout_s = 900;          // --timeout: a rank with no progress for this long ends the job (0 = never)       // --no-preflight: skip the memory check before allocating (plan/preflight.h)
};

}  // namespace gpt
