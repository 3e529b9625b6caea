// Hugging Face's GPT-2 weights (model.safetensors of GPT2Model / GPT2LMHeadModel) <-> our model.
//
// Names (with or without the "transformer." prefix that GPT2LMHeadModel's state dict adds):
//   wte.weight [V, C]   wpe.weight [maxT, C]   ln_f.weight [C]   ln_f.bias [C]
//   h.<i>.ln_1.weight/bias [C]            h.<i>.attn.c_attn.weight [C, 3C]   h.<i>.attn.c_attn.bias [3C]
//   h.<i>.attn.c_proj.weight [C, C]       h.<i>.attn.c_proj.bias [C]         h.<i>.ln_2.weight/bias [C]
//   h.<i>.mlp.c_fc.weight [C, 4C]         h.<i>.mlp.c_fc.bias [4C]
//   h.<i>.mlp.c_proj.weight [4C, C]       h.<i>.mlp.c_proj.bias [C]
// The four weights above are Conv1D: stored [in, out] and applied as x @ W + b, so each is transposed into
// our (out, in) matrices (qkvw, attprojw, fcw, fcprojw). Import rules:
//   - h.<i>.attn.bias and h.<i>.attn.masked_bias (the causal-mask buffers of older files) are skipped;
//   - lm_head.weight, when present, must equal wte.weight value for value (our output layer is tied to the
//     token embedding); any other tensor is an error, and so is a missing one;
//   - F32, F16 and BF16 tensors are widened exactly to fp32 (the dtype may differ from tensor to tensor);
//   - L, C, maxT and V come from the shapes, every layer must agree with them; the vocabulary is padded to
//     a multiple of 128 with zero rows, as in our model files;
//   - the number of heads is not in the tensors: the caller's value when given (gpt import --n-head), else
//     __metadata__ "n_head" (or "num_attention_heads") when the file has it, else C / 64 (the head size of
//     every GPT-2 model), which must divide evenly.
// Export writes what GPT2LMHeadModel loads: the names above without prefix (as Hugging Face's own GPT-2
// checkpoints), Conv1D layout, the V real rows of wte, F32, no lm_head (tied), and __metadata__
// {"format": "pt", "n_head": "<NH>"} ("n_head" lets the import find NH again; transformers ignores it).
#pragma once
#include <string>
#include <vector>

#include "src/io/model_file.h"

namespace gpt {

struct HfImport {
  ModelWeights weights;
  std::string summary;  // one line for the user: dtypes, where NH came from, what was skipped
};

// num_heads: 0 = find it as described above. Throws gpt::Error naming the file and the tensor.
HfImport import_hf_gpt2(const std::string& path, int num_heads = 0);

// Writes units[u] (layout.unit(u).numel floats each) as a Hugging Face GPT-2 model.safetensors, atomically.
void save_hf_gpt2(const std::string& path, const Layout& layout, const std::vector<const float*>& units);

}  // namespace gpt
