// Model hyperparameters: the named presets (d2 … d48) and custom sizes, validated in one place.
#pragma once
#include <cstdint>
#include <string>

namespace gpt {

struct GPTConfig {
  int max_seq_len = 1024;     // maxT: rows of the position embedding
  int vocab_size = 50257;     // V: real tokens
  int padded_vocab_size = 0;  // Vp: V rounded up to a multiple of 128 (filled by finalize())
  int num_layers = 12;        // L: transformer blocks
  int num_heads = 12;         // NH: attention heads; must divide channels
  int channels = 768;         // C: model width

  // Fills padded_vocab_size and validates; throws gpt::Error with a one-line reason.
  void finalize();
  int head_size() const { return channels / num_heads; }
  int64_t num_params() const;           // all parameters, with the padded vocabulary
  int64_t num_nonembedding_params() const;  // without wte and wpe (Kaplan's N)
  std::string describe() const;
  bool operator==(const GPTConfig& o) const;
};

// Preset by name ("d2", "d4", "d6", "d12", "d24", "d36", "d48"); vocab and seq-len keep their defaults.
// Throws gpt::Error listing the known names.
GPTConfig preset_config(const std::string& name);
const char* preset_names();

}  // namespace gpt
