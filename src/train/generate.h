// Autoregressive text generation: repeated forward passes over a fixed-length window (no KV cache: the
// model is trained, not served, here), sampling the next token with temperature, top-k and top-p.
// Every rank runs it with the same RNG so that sharded parameters are gathered in lockstep.
#pragma once
#include <functional>
#include <vector>

#include "src/core/rng.h"
#include "src/model/gpt.h"

namespace gpt {

struct SampleParams {
  float temperature = 1.0f;  // 0 = greedy
  int top_k = 0;             // 0 = no top-k cut
  float top_p = 1.0f;        // nucleus mass; 1 = no cut
};

// Picks one id from logits[0 .. V) (host, fp32). Validates the parameters.
int sample_token(std::vector<float> logits, const SampleParams& p, Rng& rng);

// Appends `count` tokens after `prompt`; on_token (if set) is called with each new id as it is produced.
std::vector<int> generate(GPT& model, ParamSource& params, const std::vector<int>& prompt, int count,
                          const SampleParams& p, Rng& rng, const std::function<void(int)>& on_token = {});

}  // namespace gpt
