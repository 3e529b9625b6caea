// `gpt eval`, `gpt sample`, `gpt tokenize` and `gpt export` (llm.c .bin or Hugging Face safetensors): the
// commands that use a model or data file without training.
#include <cstdio>
#include <filesystem>

#include "src/cli/commands.h"
#include "src/cli/flags.h"
#include "src/core/check.h"
#include "src/util/paths.h"
#include "src/dist/mesh.h"
#include "src/fsdp/engine.h"
#include "src/io/data_loader.h"
#include "src/io/hf_gpt2.h"
#include "src/io/model_file.h"
#include "src/io/prepare.h"
#include "src/io/token_record.h"
#include "src/io/tokenizer.h"
#include "src/model/gpt.h"
#include "src/runtime/preflight_run.h"
#include "src/runtime/runtime.h"
#include "src/train/checkpoint.h"
#include "src/train/generate.h"
#include "src/util/log.h"

namespace gpt {
namespace {

// A model with weights from an llm.c model file; with --tp its tensor-parallel group's collectives on the
// device's communicator. Members are destroyed in reverse: the engine and model before the groups.
struct LoadedModel {
  Runtime rt;
  Mesh mesh;
  std::unique_ptr<TensorParallel> tp;
  std::unique_ptr<GPT> model;
  std::unique_ptr<FsdpEngine> engine;
};

// Each rank's model for B x T forwards (every data-parallel rank holds all of its slices: --shard none,
// parameters only), or with `sampling` for a key/value cache of T positions, checked against the memory first
// (runtime/preflight_run.h) unless skip. tp > 1: consecutive ranks split the model (tensor_parallel.h), every
// row on every rank of the group (evaluation and sampling do not split the rows).
LoadedModel load_for_inference(const std::string& path, const std::string& device, Communicator& world, int B, int T,
                               int tp, bool skip_preflight, const char* what, bool sampling = false) {
  LoadedModel m;
  MemPlanInput run;
  run.cfg = read_model_file_config(path);
  GPT_CHECK(T <= run.cfg.max_seq_len, "-T ", T, " exceeds the model's sequence length ", run.cfg.max_seq_len);
  run.world = world.world();
  run.tp = TpOptions::parse(tp, "off");
  check_tp_run(run.tp, run.cfg, run.world, B, T, "the world size");
  m.rt = make_runtime(world, device, "auto", run.cfg.channels, run.cfg.num_heads);
  run.fsdp.strategy = ShardStrategy::none;
  run.fsdp.inference = true;  // parameters only: no gradient or Adam state to allocate
  run.sampling = sampling;    // (1, T) is then the key/value cache of T positions
  run.B = B;
  run.T = T;
  run.compute = m.rt.backend->compute_dtype();
  run.attention = m.rt.backend->attention_path();
  preflight(world, *m.rt.backend, run, what, skip_preflight, false);
  ModelWeights w = load_model_file(path);
  if (tp > 1) {
    m.mesh = make_mesh(*m.rt.engine_comm, tp);
    m.tp = std::make_unique<TensorParallel>(*m.mesh.tp, false, run.compute);
  }
  m.model = std::make_unique<GPT>(*m.rt.backend, w.config, RecomputePolicy{}, WrapPolicy{}, false, m.tp.get());
  m.engine = std::make_unique<FsdpEngine>(*m.rt.backend, m.mesh.dp ? *m.mesh.dp : *m.rt.engine_comm,
                                          m.model->layout(), run.fsdp);
  const Layout file_layout(w.config);  // the file's units: the default layout's
  std::vector<const float*> file_units;
  for (const std::vector<float>& u : w.units) file_units.push_back(u.data());
  std::vector<float> mine;  // (numel of unit u) this rank's slice of the unit
  for (int u = 0; u < m.model->layout().num_units(); u++) {
    mine.assign((size_t)m.model->layout().unit(u).numel, 0.0f);
    copy_unit(m.model->layout(), u, file_layout, file_units, mine.data());
    m.engine->set_unit_from_host(u, mine.data());
  }
  return m;
}

}  // namespace

int cmd_eval(int argc, char** argv, Communicator& world) {
  Flags f("eval", argc, argv, {"--no-preflight"});
  if (f.help()) {
    std::printf("usage: gpt eval --model MODEL.bin --val GLOB [-B 4] [-T 64] [--batches 8] [--device cpu|cuda]\n"
                "                [--tp T] [--no-preflight]\n"
                "Mean cross-entropy of the model on the data; the last line is \"val_loss <float>\".\n"
                "  --tp T   split the model over T consecutive ranks (tensor parallelism, as gpt train --tp; every\n"
                "           rank evaluates all rows); launch with mpirun -n (a multiple of T)\n");
    return 0;
  }
  const std::string model_path = f.required("--model"), val = f.required("--val");
  const int B = f.i32("-B", 4, 1, 1 << 20), T = f.i32("-T", 64, 1, 1 << 20), batches = f.i32("--batches", 8, 1, 1 << 30);
  const int tp = f.i32("--tp", 1, 1, 1 << 20);
  const std::string device = f.str("--device", "auto");
  const bool skip = f.on("--no-preflight");
  f.finish();
  // Shards that say which tokenizer made them must be that of the model: any other reads as noise.
  if (const std::optional<TokenRecord> rec = find_token_record(val, "--val")) {
    const int V = read_model_file_config(model_path).vocab_size;
    GPT_CHECK(V == rec->vocab_size, "--model ", model_path, ": a vocabulary of ", V,
              " tokens, but the --val shards were tokenized with ", rec->describe());
  }
  LoadedModel m = load_for_inference(model_path, device, world, B, T, tp, skip, "eval");
  DataLoader loader(val, B, T, 0, 1, m.model->config().vocab_size);
  loader.check_batches(batches, "--batches");
  std::vector<int> in((size_t)B * T), tg(in.size());
  double sum = 0;
  for (int i = 0; i < batches; i++) {
    loader.next_batch(in.data(), tg.data());
    sum += m.model->forward(in.data(), tg.data(), B, T, *m.engine);
  }
  log_rank0(world, "val_loss ", sum / batches);
  return 0;
}

int cmd_sample(int argc, char** argv, Communicator& world) {
  Flags f("sample", argc, argv, {"--no-preflight"});
  if (f.help()) {
    std::printf("usage: gpt sample --model MODEL.bin [--prompt TEXT] [--tokens 128] [--temperature 1.0] [--top-k 0]\n"
                "                  [--top-p 1.0] [--seed 1337] [--tokenizer auto|byte|gpt2] [--data-dir data] [--device ...]\n"
                "                  [--tp T] [--no-preflight]\n"
                "Generates text, streaming tokens as they are produced (rank 0 prints them).\n"
                "  --tp T   split the model over T consecutive ranks (tensor parallelism, as gpt train --tp)\n");
    return 0;
  }
  const std::string model_path = f.required("--model");
  const std::string prompt = f.text("--prompt", "");
  const int tokens = f.i32("--tokens", 128, 1, 1 << 20);
  SampleParams sp;
  sp.temperature = (float)f.f64("--temperature", 1.0, 0, 100);
  sp.top_k = f.i32("--top-k", 0, 0, 1 << 24);
  sp.top_p = (float)f.f64("--top-p", 1.0, 1e-6, 1.0);
  Rng rng((uint64_t)f.i64("--seed", 1337, 0, INT64_MAX));
  std::string tk = f.str("--tokenizer", "auto");
  const std::string data_dir = f.str("--data-dir", default_data_dir()), device = f.str("--device", "auto");
  const int tp = f.i32("--tp", 1, 1, 1 << 20);
  const bool skip = f.on("--no-preflight");
  f.finish();
  const GPTConfig cfg = read_model_file_config(model_path);
  const int V = cfg.vocab_size;
  if (tk == "auto") tk = V == 257 ? "byte" : "gpt2";
  std::unique_ptr<Tokenizer> tok = make_tokenizer(tk, data_dir);
  GPT_CHECK(tok->vocab_size() == V, "--model ", model_path, ": vocabulary of ", V, " tokens does not match the ", tk,
            " tokenizer's ", tok->vocab_size());
  std::vector<int> ids = prompt.empty() ? std::vector<int>{tok->eot_token()} : tok->encode(prompt, true);
  const int window = std::min<int>(cfg.max_seq_len, (int)ids.size() + tokens);  // generate()'s cache capacity
  LoadedModel m = load_for_inference(model_path, device, world, 1, window, tp, skip, "sample", true);
  const bool prints = world.rank() == 0;  // every rank draws the same tokens (the same RNG): one prints them
  if (prints) std::fputs(prompt.c_str(), stdout);
  generate(*m.model, *m.engine, ids, tokens, sp, rng, [&](int id) {
    if (!prints) return;
    std::string piece = tok->decode_token(id);
    std::fwrite(piece.data(), 1, piece.size(), stdout);
    std::fflush(stdout);
  });
  if (prints) std::fputc('\n', stdout);
  return 0;
}

int cmd_tokenize(int argc, char** argv, Communicator& world) {
  Flags f("tokenize", argc, argv, {"--progress"});
  if (f.help()) {
    std::printf("usage: gpt tokenize --input FILE|DIR --out DIR [--tokenizer gpt2|byte] [--val-fraction 0.1]\n"
                "                    [--shard-size TOKENS (>= 1024)] [--data-dir data] [--progress]\n"
                "Writes llm.c token shards train_*.bin and val_*.bin (EOT between documents).\n");
    return 0;
  }
  PrepareOptions o;
  o.input = f.required("--input");
  o.out_dir = f.required("--out");
  o.tokenizer = f.str("--tokenizer", "gpt2");
  o.val_fraction = f.f64("--val-fraction", 0.1, 0, 0.999999);
  o.shard_size = f.i64("--shard-size", 100000000, 1024, 2147483647);  // fewer: thousands of tiny files
  o.data_dir = f.str("--data-dir", default_data_dir());
  o.force_progress = f.on("--progress");
  f.finish();
  prepare_dataset(o);
  return 0;
}

int cmd_export(int argc, char** argv, Communicator& world) {
  Flags f("export", argc, argv, {"--no-preflight"});
  if (f.help()) {
    std::printf("usage: gpt export --from RUN_DIR|CKPT_DIR|MODEL.bin --out FILE|DIR [--format bin|safetensors]\n"
                "Consolidates a sharded checkpoint (any world size), or converts a model file, into:\n"
                "  bin          an llm.c model file (version 3, fp32; the default)\n"
                "  safetensors  a Hugging Face GPT-2 folder that transformers loads with no other file:\n"
                "               GPT2LMHeadModel.from_pretrained(DIR). --out DIR writes DIR/model.safetensors and\n"
                "               DIR/config.json (DIR is created if needed); an --out ending in .safetensors writes\n"
                "               that file and config.json beside it. The weights: names without the 'transformer.'\n"
                "               prefix, Conv1D [in, out] layout, F32, lm_head tied to wte, the V real rows of wte\n"
                "               (config.json's vocab_size is V); config.json: model_type gpt2, n_layer, n_head, n_embd,\n"
                "               n_positions, n_ctx, vocab_size, gelu_new, layer_norm_epsilon 1e-05, bos/eos token\n"
                "               id <|endoftext|> for the GPT-2 and byte vocabularies. gpt import reads it back.\n");
    return 0;
  }
  std::string from = f.required("--from");
  const std::string out = f.required("--out");
  const std::string format = f.str("--format", "bin");
  const bool skip = f.on("--no-preflight");
  f.finish();
  GPT_CHECK(format == "bin" || format == "safetensors", "gpt export: --format must be bin or safetensors, got '",
            format, "'");
  // safetensors: the model file and config.json; --out is a folder unless it names the .safetensors file.
  std::string model_out = out, config_out;
  if (format == "safetensors") {
    namespace fs = std::filesystem;
    const bool file = out.size() > 12 && out.compare(out.size() - 12, 12, ".safetensors") == 0;
    std::error_code ec;
    if (!file) {
      GPT_CHECK(!fs::exists(out, ec) || fs::is_directory(out, ec), "--out ", out, ": exists and is not a folder (give a "
                "folder for model.safetensors and config.json, or a path ending in .safetensors)");
      fs::create_directories(out, ec);
      GPT_CHECK(!ec, "--out ", out, ": cannot create the folder: ", ec.message());
    }
    model_out = file ? out : (fs::path(out) / "model.safetensors").string();
    const fs::path folder = fs::path(model_out).parent_path();
    config_out = ((folder.empty() ? fs::path(".") : folder) / "config.json").string();
    check_output_file("--out", config_out, "--from", from);
  }
  check_output_file("--out", model_out, "--from", from);
  GPTConfig config;
  std::vector<std::vector<float>> units;
  std::error_code ec;
  if (std::filesystem::is_regular_file(from, ec)) {  // an llm.c model file
    preflight_host_bytes(world, 4 * read_model_file_config(from).num_params(), "export", skip);
    ModelWeights w = load_model_file(from);
    config = w.config;
    units = std::move(w.units);
  } else {
    GPT_CHECK(std::filesystem::is_directory(from, ec), "--from ", from,
              ": no such model file, run directory or checkpoint directory");
    std::string ckpt = find_latest_checkpoint(from);
    if (ckpt.empty()) ckpt = from;  // maybe a checkpoint directory itself
    GPT_CHECK(std::filesystem::exists(ckpt + "/manifest.txt", ec), "--from ", from,
              ": a directory with no checkpoint in it (no ckpt_* with a manifest.txt, and no manifest.txt of its own)");
    preflight_host_bytes(world, 4 * checkpoint_config(ckpt).num_params(), "export", skip);
    ConsolidatedModel m = consolidate_checkpoint(ckpt);
    from = ckpt;
    config = m.config;
    units = std::move(m.units);
  }
  Layout layout(config);
  std::vector<const float*> ptrs;
  for (auto& u : units) ptrs.push_back(u.data());
  if (format == "bin") {
    save_model_file(out, layout, ptrs);
  } else {
    save_hf_gpt2(model_out, config_out, layout, ptrs);
  }
  log_rank0(world, "exported ", from, " -> ", format == "bin" ? out : model_out + " + " + config_out, " (", format,
            ", ", config.describe(), ")");
  return 0;
}

}  // namespace gpt
