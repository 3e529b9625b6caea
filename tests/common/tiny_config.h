// A small finalized model shape for tests: the one place tests spell out a GPTConfig field by field.
#pragma once
#include "src/model/config.h"

namespace gpt::test {

inline GPTConfig tiny_config(int layers, int heads, int channels, int max_seq_len, int vocab) {
  GPTConfig c;
  c.num_layers = layers;
  c.num_heads = heads;
  c.channels = channels;
  c.max_seq_len = max_seq_len;
  c.vocab_size = vocab;
  c.finalize();
  return c;
}

}  // namespace gpt::test
