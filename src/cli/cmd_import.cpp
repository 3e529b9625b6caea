// `gpt import`: a Hugging Face GPT-2 folder, model.safetensors or sharded checkpoint -> an llm.c model file
// (rules in io/hf_gpt2.h).
#include <cstdio>

#include "src/cli/commands.h"
#include "src/cli/flags.h"
#include "src/core/check.h"
#include "src/io/hf_gpt2.h"
#include "src/io/model_file.h"
#include "src/util/log.h"

namespace gpt {

int cmd_import(int argc, char** argv, Communicator& world) {
  Flags f("import", argc, argv, {});
  if (f.help()) {
    std::printf(
        "usage: gpt import --from DIR|model.safetensors|model.safetensors.index.json --out MODEL.bin [--n-head N]\n"
        "Converts Hugging Face GPT-2 weights (e.g. a folder downloaded from the hub: huggingface-cli download\n"
        "openai-community/gpt2 --local-dir gpt2) into an llm.c model file (version 3, fp32) for gpt sample / eval /\n"
        "train --init-from.\n"
        "  --from DIR: DIR/model.safetensors, else the sharded checkpoint of DIR/model.safetensors.index.json\n"
        "  (model-0000k-of-0000n.safetensors: every shard present, each tensor in the shard the weight_map names,\n"
        "  in no other shard, and no shard tensor missing from the weight_map). A file or an index may be given\n"
        "  instead of the folder.\n"
        "  config.json in the same folder, when present, is read as transformers' GPT2Config and checked against\n"
        "  the tensors: n_layer, n_embd, n_positions, vocab_size (and n_ctx); n_head gives the number of heads;\n"
        "  model_type gpt2, activation_function gelu_new, layer_norm_epsilon 1e-5 and tie_word_embeddings true\n"
        "  are required where stated (absent fields take GPT2Config's defaults, as from_pretrained does).\n"
        "  Reads GPT2Model or GPT2LMHeadModel names, with or without the 'transformer.' prefix; F32, F16 or BF16.\n"
        "  Conv1D weights ([in, out]) are transposed; the attention mask buffers (attn.bias, attn.masked_bias)\n"
        "  are skipped; lm_head.weight, if present, must equal wte.weight (the output layer is tied).\n"
        "  L, C, maxT and V come from the tensors; the vocabulary is padded to a multiple of 128.\n"
        "  --n-head N  the number of attention heads, which the tensors do not record; config.json must agree\n"
        "              when there is one. Without it: config.json's n_head, else the files' __metadata__\n"
        "              \"n_head\", else C/64 (every GPT-2 size has head size 64). The summary says which.\n");
    return 0;
  }
  const std::string from = f.required("--from"), out = f.required("--out");
  const int n_head = f.i32("--n-head", 0, 1, 1 << 16);
  f.finish();
  check_output_file("--out", out, "--from", from);
  HfImport r = import_hf_gpt2(from, n_head);
  const Layout layout(r.weights.config);
  std::vector<const float*> ptrs;
  for (const auto& u : r.weights.units) ptrs.push_back(u.data());
  save_model_file(out, layout, ptrs);
  log_rank0(world, "imported ", from, " -> ", out, " (", r.weights.config.describe(), "; ", r.summary, ")");
  return 0;
}

}  // namespace gpt
