// `gpt import`: a Hugging Face GPT-2 model.safetensors -> an llm.c model file (rules in io/hf_gpt2.h).
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
        "usage: gpt import --from model.safetensors --out MODEL.bin [--n-head N]\n"
        "Converts Hugging Face GPT-2 weights (e.g. openai-community/gpt2's model.safetensors) into an llm.c model\n"
        "file (version 3, fp32) for gpt sample / eval / train --init-from.\n"
        "  Reads GPT2Model or GPT2LMHeadModel names, with or without the 'transformer.' prefix; F32, F16 or BF16.\n"
        "  Conv1D weights ([in, out]) are transposed; the attention mask buffers (attn.bias, attn.masked_bias)\n"
        "  are skipped; lm_head.weight, if present, must equal wte.weight (the output layer is tied).\n"
        "  L, C, maxT and V come from the tensors; the vocabulary is padded to a multiple of 128.\n"
        "  --n-head N  the number of attention heads, which the tensors do not record. Without it: the file's\n"
        "              __metadata__ \"n_head\" when present, else C/64 (every GPT-2 size has head size 64).\n");
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
