// config.json of a Hugging Face GPT-2 folder: what transformers' GPT2Config (and so
// GPT2LMHeadModel.from_pretrained) reads beside the weights, checked against the tensors on import and
// written on export.
//
// Read rules. The file must be one JSON object (a duplicated key is an error). A field the file omits takes
// GPT2Config's default, because that is the value from_pretrained would use:
//   n_layer 12   n_head 12   n_embd 768   n_positions 1024   vocab_size 50257      positive integers
//   n_ctx        no default; when present it must equal the context length (n_positions, wpe's rows)
//   n_inner      null (= 4 * n_embd) or 4 * n_embd: our MLP is 4C wide
//   model_type "gpt2"; activation_function "gelu_new" or "gelu_pytorch_tanh" (both are the tanh GELU
//   our kernels compute); layer_norm_epsilon 1e-5 (our LayerNorm's); tie_word_embeddings true (our output
//   layer is the token embedding); scale_attn_weights true and scale_attn_by_inverse_layer_idx false
//   (our attention scales by 1/sqrt(head size) only); add_cross_attention false
// The other fields (dropouts, token ids, summary_*, architectures, torch_dtype, use_cache, ...) do not
// change the weights or the forward pass in evaluation and are not read. Every error is one line naming the
// file and the field.
#pragma once
#include <string>

#include "src/model/config.h"

namespace gpt {

struct HfConfig {
  std::string path;  // the config.json read
  // (value, whether the file states it; otherwise GPT2Config's default)
  struct Field {
    int value = 0;
    bool stated = false;
  };
  Field n_layer, n_head, n_embd, n_positions, vocab_size;
  Field n_ctx;  // stated only when present: it has no default
};

// Reads config.json and checks the fields the model cannot honour (see above). Throws gpt::Error.
HfConfig read_hf_config(const std::string& path);

// Each stated or defaulted size against the shape the tensors give (L, C, maxT, V of `tensors`; its heads
// are not looked at): a one-line error naming the file, the field, its value and what the tensors say.
void check_hf_config(const HfConfig& config, const GPTConfig& tensors);

// The config.json that export writes for a model of this shape (every field that GPT2Config needs, the
// vocabulary being the V real rows export writes for wte).
std::string hf_config_json(const GPTConfig& cfg);

}  // namespace gpt
