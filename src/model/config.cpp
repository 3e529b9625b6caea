// Presets follow GPT-2's family: d12 = 124M, d24 = 350M, d36 = 774M, d48 = 1558M (with V = 50257).
// d2/d4/d6 are small members of the same recipe (64 channels per head) for tests and quick runs.
#include "src/model/config.h"

#include "src/core/check.h"

namespace gpt {

void GPTConfig::finalize() {
  GPT_CHECK(num_layers >= 1 && num_layers <= 1024, "config: --n-layer must be in [1, 1024], got ", num_layers);
  GPT_CHECK(num_heads >= 1, "config: --n-head must be >= 1, got ", num_heads);
  GPT_CHECK(channels >= 1 && channels <= 65536, "config: --d-model must be in [1, 65536], got ", channels);
  GPT_CHECK(channels % num_heads == 0, "config: --d-model (", channels, ") must be divisible by --n-head (",
            num_heads, ")");
  GPT_CHECK(max_seq_len >= 1 && max_seq_len <= 1 << 20, "config: --seq-len must be in [1, 1048576], got ",
            max_seq_len);
  GPT_CHECK(vocab_size >= 2 && vocab_size <= 1 << 24, "config: --vocab must be in [2, 16777216], got ",
            vocab_size);
  padded_vocab_size = (vocab_size + 127) / 128 * 128;
}

int64_t GPTConfig::num_params() const {
  int64_t C = channels;
  int64_t Vp = padded_vocab_size ? padded_vocab_size : (vocab_size + 127) / 128 * 128;
  return Vp * C + (int64_t)max_seq_len * C + num_nonembedding_params();
}

int64_t GPTConfig::num_nonembedding_params() const {
  int64_t C = channels, L = num_layers;
  int64_t per_block = 2 * C + (3 * C * C + 3 * C) + (C * C + C) + 2 * C + (4 * C * C + 4 * C) + (4 * C * C + C);
  return L * per_block + 2 * C;
}

std::string GPTConfig::describe() const {
  return str("L=", num_layers, " NH=", num_heads, " C=", channels, " maxT=", max_seq_len, " V=", vocab_size,
             " Vp=", padded_vocab_size, " params=", num_params());
}

bool GPTConfig::operator==(const GPTConfig& o) const {
  return max_seq_len == o.max_seq_len && vocab_size == o.vocab_size &&
         padded_vocab_size == o.padded_vocab_size && num_layers == o.num_layers &&
         num_heads == o.num_heads && channels == o.channels;
}

const char* preset_names() { return "d2, d4, d6, d12, d24, d36, d48"; }

GPTConfig preset_config(const std::string& name) {
  GPTConfig c;
  struct P { const char* n; int L, NH, C; };
  static const P presets[] = {{"d2", 2, 2, 128},   {"d4", 4, 4, 256},    {"d6", 6, 6, 384},
                              {"d12", 12, 12, 768}, {"d24", 24, 16, 1024}, {"d36", 36, 20, 1280},
                              {"d48", 48, 25, 1600}};
  for (const P& p : presets) {
    if (name == p.n) {
      c.num_layers = p.L;
      c.num_heads = p.NH;
      c.channels = p.C;
      return c;
    }
  }
  fail("--config: unknown preset '", name, "' (known: ", preset_names(), ")");
}

}  // namespace gpt
