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
//   - the files are one model.safetensors or the shards of a sharded checkpoint, found from a folder, a file
//     or an index as io/hf_index.h says; config.json beside them, when there is one, is read and checked
//     against the tensors (io/hf_config.h);
//   - the number of heads is not in the tensors: the caller's count when given (gpt import --n-head), else
//     config.json's n_head, else __metadata__ "n_head" (or "num_attention_heads") when the files have it,
//     else C / 64 (the head size of every GPT-2 model), which must divide evenly. A caller's count that
//     config.json contradicts is an error naming both: transformers reads the folder with config.json's, so
//     taking the caller's would give a model that computes something else than the folder does.
// Export writes what GPT2LMHeadModel.from_pretrained loads: model.safetensors with the names above without
// prefix (as Hugging Face's own GPT-2 checkpoints), Conv1D layout, the V real rows of wte (the padding rows
// V..Vp-1 are dropped, so config.json's vocab_size is V), F32, no lm_head (tied), __metadata__
// {"format": "pt", "n_head": "<NH>"} (transformers ignores the metadata), and config.json.
#pragma once
#include <string>
#include <vector>

#include "src/io/model_file.h"

namespace gpt {

struct HfImport {
  ModelWeights weights;
  std::string summary;  // one line for the user: dtypes, where NH came from, what was skipped
};

// path: a folder, a .safetensors file or a sharded index. num_heads: 0 = find it as described above.
// Throws gpt::Error naming the file and the tensor or field.
HfImport import_hf_gpt2(const std::string& path, int num_heads = 0);

// Writes units[u] (layout.unit(u).numel floats each) as a Hugging Face GPT-2 model.safetensors at path and
// its config.json at config_path, each atomically (io/atomic_file.h), renamed into place one after the other.
void save_hf_gpt2(const std::string& path, const std::string& config_path, const Layout& layout,
                  const std::vector<const float*>& units);

}  // namespace gpt
