// See train_flags.h.
#include "src/cli/train_flags.h"

#include "kernels/attention_rules.h"
#include "src/cli/sharding_flags.h"
#include "src/core/check.h"
#include "src/io/model_file.h"
#include "src/io/token_record.h"
#include "src/io/tokenizer.h"
#include "src/util/paths.h"

namespace gpt {

const std::set<std::string> kTrainSwitches = {"--resume", "--no-sync", "--quiet", "--json", "--no-preflight"};

const char* kModelFlagsHelp =
    "model:\n"
    "  --config NAME        preset: d2 d4 d6 d12 (124M) d24 (350M) d36 (774M) d48 (1558M)\n"
    "  --n-layer L --n-head NH --d-model C   override the preset's sizes\n"
    "  --seq-len T          max sequence length (position embeddings), default 1024\n"
    "  --vocab V            vocabulary size (default: the data's, from the gpt_tokenizer.json gpt tokenize wrote\n"
    "                       beside --train/--val shards; else 50257, or 257 with --tokenizer byte)\n";

const char* kTrainFlagsHelp =
    "data and batch:\n"
    "  --train GLOB         training shards (llm.c format)      --val GLOB   validation shards\n"
    "  -B N                 per-rank micro-batch (sequences), default 4\n"
    "  -T N                 sequence length, default 64\n"
    "  --total-batch TOK    global batch in tokens (default B*T*ranks); sets gradient accumulation\n"
    "optimizer:\n"
    "  --steps N (100)  --lr F (6e-4)  --warmup N (0)  --min-lr-frac F (0.1)\n"
    "  --weight-decay F (0.1, matrices and embeddings)  --grad-clip F (1.0, 0 = off)  --seed N (1337)\n"
    "  --beta1 F (0.9)  --beta2 F (0.95)   AdamW's moment decays, in [0, 0.9999]\n"
    "  --init gpt2|width    weight matrices N(0, 0.02) as GPT-2 (default), or N(0, 0.02*sqrt(768/C)): the\n"
    "                       1/sqrt(fan-in) rule, GPT-2's own std at C = 768; small models train steadier\n"
    "sharding and memory:\n"
    "  --device cpu|cuda|auto        --shard full|grad_op|none|hybrid (full)  --shard-group G\n"
    "  --tp T (1)           tensor parallelism: T consecutive ranks split every block (Megatron's column- and\n"
    "                       row-parallel products, the vocabulary of wte and of the loss); T divides the heads, the\n"
    "                       padded vocabulary and the world, whose world/T data-parallel ranks the --shard flags apply to\n"
    "  --sequence-parallel on|off  (on when T > 1) activations between the products split along the B*T rows over\n"
    "                       the T ranks: all-gathers and reduce-scatters instead of all-reduces, 1/T of their memory\n"
    "  --engine full|naive  the sharding engine (full): naive gathers and reduces each unit waiting for it, no\n"
    "                       prefetch or overlap (for reading, and the reference the full engine matches bit for\n"
    "                       bit); it takes --shard full, grad_op or none, and no --offload of states, --no-sync,\n"
    "                       --reduce-dtype bf16 or --gather-slots\n"
    "  --gather-slots K (2)  gather slots for the non-root units: the unit in use + K-1 gathered ahead of it\n"
    "                       (K = 1: no prefetch); each costs the largest non-root unit, padded, in the compute dtype\n"
    "                       (grad_op: one slot per unit, K only sets how far ahead forward gathers)\n"
    "  --no-sync            accumulate full grads locally, reduce on the last micro-step\n"
    "  --recompute none|full|every:K|selective\n"
    "  --offload none|optimizer|params|activations, or a list (params,activations)\n"
    "                       optimizer: fp32 states and AdamW on the host (PCIe: the gradient shard down, the\n"
    "                       param shard up, per step); params: as optimizer, and every gather first uploads the\n"
    "                       shard (per unit and pass); activations: what each block keeps for backward (its\n"
    "                       input under full recompute, everything under none) goes to the host after its\n"
    "                       forward and comes back a block ahead of its backward (a ring of 3 on the device)\n"
    "  --wrap block|blocks:K|min-params:N  blocks per sharding unit (block): K blocks, or as few as reach N\n"
    "                       parameters (suffix k/M/B). Fewer units: fewer collectives per step (2 gathers and\n"
    "                       1 reduce-scatter per unit per micro-step), each larger; every gather slot then holds\n"
    "                       the largest unit, so gathered bytes grow K-fold\n"
    "  --attention simple|fused|cudnn, default auto: cudnn where it runs, else fused, else simple (cuda; cpu: simple)\n"
    "                       simple keeps (T,T) probabilities; fused (head sizes 32, 64) and cudnn (cuDNN flash\n"
    "                       attention, head sizes multiples of 8 up to 128, 256 on sm_90) keep none\n"
    "  --reduce-dtype fp32|bf16 (fp32)  dtype gradients are reduced in (bf16: half the gradient traffic)\n"
    "  --plan auto          run the fastest configuration gpt plan finds for this world, model and --total-batch\n"
    "                       (printed first): sharding, recompute, offloads, wrap, gather slots, -B, reduce dtype\n"
    "                       and no-sync; each of those flags given explicitly is kept. Hardware: --hardware FILE,\n"
    "                       else the GPU's datasheet (data/hardware/) or this CPU's calibration, made once and\n"
    "                       cached (cpu_hardware.json beside cpu_peak.json, below)\n"
    "run:\n"
    "  --out DIR            run directory: checkpoints, model.bin     --resume   continue from the newest checkpoint\n"
    "  --init-from FILE     start from an llm.c model file (its shape: no model flags needed)\n"
    "  --save-every N (0 = at the end)  --keep K (2)\n"
    "  --val-every N  --val-batches N (8)  --sample-every N  --sample-tokens N (64)  --temperature F (1)  --top-k K (0)\n"
    "  --tokenizer byte|gpt2|auto|none  for samples (default: the data's record, else by --vocab; none: no samples)\n"
    "  --data-dir DIR (found next to the binary)  --metrics FILE.jsonl  --trace FILE.json\n"
    "  --peak-tflops F      peak for MFU (default: cuda the GPU's dense bf16 peak, 989 on H100/H200 SXM; cpu measured sgemm,\n"
    "                       see gpt bench --help); a step faster than it becomes the peak\n"
    "  --max-bad-steps N    consecutive non-finite steps before stopping (10)   --quiet\n"
    "  --no-preflight       skip the check that the run fits in memory before it allocates\n"
    "  --timeout S          end the job when a rank makes no progress for S seconds (900; 0 = never)\n";

// The model's tokenizer: --tokenizer, else the data's tokenizer record (io/token_record.h), else "auto"
// (chosen later by the vocabulary). A --tokenizer that contradicts the record is an error.
struct TokenizerChoice {
  std::string name;                   // byte | gpt2 | auto | none
  std::optional<TokenRecord> record;  // the record beside --train / --val, if any
};

static TokenizerChoice choose_tokenizer(Flags& f) {
  TokenizerChoice t;
  t.record = data_token_record(f.str("--train", ""), f.str("--val", ""));
  t.name = f.str("--tokenizer", "auto");
  GPT_CHECK(t.name == "auto" || t.name == "byte" || t.name == "gpt2" || t.name == "none",
            "--tokenizer: expected byte, gpt2, auto or none, got '", t.name, "'");
  if (!t.record) return t;
  GPT_CHECK(t.name == "auto" || t.name == "none" || t.name == t.record->tokenizer, "--tokenizer ", t.name,
            ": the data was tokenized with ", t.record->describe(), "; drop --tokenizer to take it from the record");
  if (t.name == "auto") t.name = t.record->tokenizer;
  return t;
}

// A model vocabulary (from `what`) that is not the data's tokenizer's is an error naming both.
static void check_vocab_against_record(const TokenizerChoice& t, int vocab, const std::string& what,
                                       const std::string& remedy) {
  GPT_CHECK(!t.record || vocab == t.record->vocab_size, what, " ", vocab, ": the data was tokenized with ",
            t.record->describe(), " (", remedy, ")");
}

static GPTConfig model_flags(Flags& f, std::string* name, const std::string& default_config, const TokenizerChoice& t) {
  *name = f.str("--config", default_config);
  GPTConfig c = preset_config(*name);
  if (f.has("--n-layer") || f.has("--n-head") || f.has("--d-model")) *name = "custom";
  c.num_layers = f.i32("--n-layer", c.num_layers, 1, 1024);
  c.num_heads = f.i32("--n-head", c.num_heads, 1, 65536);
  c.channels = f.i32("--d-model", c.channels, 1, 65536);
  c.max_seq_len = f.i32("--seq-len", c.max_seq_len, 1, 1 << 20);
  TokenizerIds named;  // the named tokenizer's ids; vocab_size 0: none named
  tokenizer_ids(t.name, &named);
  const int default_vocab = t.record ? t.record->vocab_size : named.vocab_size ? named.vocab_size : 50257;
  c.vocab_size = f.i32("--vocab", default_vocab, 2, 1 << 24);
  check_vocab_against_record(t, c.vocab_size, "--vocab", "drop --vocab to take the vocabulary from the record");
  // A model whose vocabulary is not its tokenizer's could be trained but never sampled with it.
  GPT_CHECK(named.vocab_size == 0 || c.vocab_size == named.vocab_size, "--vocab ", c.vocab_size, ": the ", t.name,
            " tokenizer has ", named.vocab_size, " tokens (drop --vocab, or use --tokenizer none)");
  c.finalize();
  return c;
}

GPTConfig parse_model_flags(Flags& f, std::string* name, const std::string& default_config, std::string* tokenizer) {
  const TokenizerChoice t = choose_tokenizer(f);
  if (tokenizer) *tokenizer = t.name;
  return model_flags(f, name, default_config, t);
}

// --init-from: the shape comes from the file. Model flags given beside it must agree with the file, and its
// vocabulary with the data's record.
static GPTConfig model_from_init_file(Flags& f, const std::string& path, std::string* name, const TokenizerChoice& t) {
  const GPTConfig file = read_model_file_config(path);
  check_vocab_against_record(t, file.vocab_size, "--init-from " + path + ": the model's vocabulary is",
                             "a model of another vocabulary cannot read these shards");
  bool any_flag = false;
  for (const char* flag : {"--config", "--n-layer", "--n-head", "--d-model", "--seq-len", "--vocab"}) any_flag |= f.has(flag);
  if (!any_flag) {
    *name = "init-from";
    return file;
  }
  const GPTConfig flags = model_flags(f, name, "d6", t);
  GPT_CHECK(flags == file, "--init-from ", path, ": the file's model is ", file.describe(), " but the model flags give ",
            flags.describe(), " (drop the model flags to take the file's shape)");
  return file;
}

TrainOptions parse_train_flags(Flags& f, const std::string& default_config) {
  TrainOptions o;
  const std::string init_from = f.str("--init-from", "");
  GPT_CHECK(init_from.empty() || !f.has("--init"), "--init: the weights come from --init-from ", init_from,
            "; drop one of the two");
  const TokenizerChoice tokenizer = choose_tokenizer(f);
  o.model = init_from.empty() ? model_flags(f, &o.config_name, default_config, tokenizer)
                              : model_from_init_file(f, init_from, &o.config_name, tokenizer);
  o.tokenizer = tokenizer.name;
  o.train_pattern = f.str("--train", "");
  o.val_pattern = f.str("--val", "");
  o.B = f.i32("-B", 4, 1, 1 << 20);
  o.T = f.i32("-T", 64, 1, 1 << 20);
  o.total_batch = f.i64("--total-batch", 0, 0, (int64_t)1 << 40);
  o.steps = f.i32("--steps", 100, 0, 1 << 30);
  o.lr = (float)f.f64("--lr", 6e-4, 0, 10);
  o.warmup = f.i32("--warmup", 0, 0, 1 << 30);
  o.min_lr_frac = (float)f.f64("--min-lr-frac", 0.1, 0, 1);
  o.optim.weight_decay = (float)f.f64("--weight-decay", 0.1, 0, 10);
  o.optim.grad_clip = (float)f.f64("--grad-clip", 1.0, 0, 1e9);
  o.optim.beta1 = (float)f.f64("--beta1", 0.9, 0, 0.9999);
  o.optim.beta2 = (float)f.f64("--beta2", 0.95, 0, 0.9999);
  o.seed = (uint64_t)f.i64("--seed", 1337, 0, INT64_MAX);
  o.init = parse_init_rule(f.str("--init", "gpt2"));
  o.device = f.str("--device", "auto");
  GPT_CHECK(o.device == "auto" || o.device == "cpu" || o.device == "cuda", "--device: expected cpu, cuda or auto, got '",
            o.device, "'");
  o.attention = f.str("--attention", "auto");
  check_attention_flag(o.attention);
  parse_sharding_flags(f, o);
  GPT_CHECK(o.recompute.mode != RecomputePolicy::Mode::every || o.recompute.every_k <= o.model.num_layers,
            "--recompute every:", o.recompute.every_k, " exceeds the model's ", o.model.num_layers, " layers");
  o.val_every = f.i32("--val-every", 0, 0, 1 << 30);
  o.val_batches = f.i32("--val-batches", 8, 1, 1 << 20);
  o.sample_every = f.i32("--sample-every", 0, 0, 1 << 30);
  o.sample_tokens = f.i32("--sample-tokens", 64, 0, 1 << 20);
  o.sample_temperature = (float)f.f64("--temperature", 1.0, 0, 100);
  o.sample_top_k = f.i32("--top-k", 0, 0, 1 << 24);
  o.data_dir = f.str("--data-dir", default_data_dir());
  o.out_dir = f.str("--out", "");
  o.save_every = f.i32("--save-every", 0, 0, 1 << 30);
  o.keep = f.i32("--keep", 2, 1, 1 << 20);
  o.resume = f.on("--resume");
  o.init_from = init_from;
  o.metrics_path = f.str("--metrics", "");
  o.trace_path = f.str("--trace", "");
  o.peak_tflops = f.f64("--peak-tflops", 0, 0, 1e6);
  o.max_bad_steps = f.i32("--max-bad-steps", 10, 1, 1 << 30);
  o.quiet = f.on("--quiet");
  o.no_preflight = f.on("--no-preflight");
  o.timeout_s = f.f64("--timeout", 900, 0, 1e7);
  return o;
}

}  // namespace gpt
