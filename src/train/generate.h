// Autoregressive text generation: the prompt once through the model, then one row per new token over a
// key/value cache (GPT::forward_cached), sampling the next token with temperature, top-k and top-p. Past
// the model's sequence length the window slides: each further token runs the last max_seq_len tokens again
// from position 0, as a forward over that window would. Every rank runs it with the same RNG so that
// sharded parameters are gathered in lockstep.
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

// The logits of the token after toks, (Vp) compute dtype on the device, through the cache: toks' newest
// token appended to what the cache holds (its length + 1 == toks.size()), or, when the cache is empty or
// full, the last `capacity` tokens (at most) run again from position 0 (absolute position embeddings: a
// window that slides is recomputed). generate() calls it once per token.
const void* next_token_logits(GPT& model, ParamSource& params, const std::vector<int>& toks, KvCache& kv);

// Appends `count` tokens after `prompt`; on_token (if set) is called with each new id as it is produced.
std::vector<int> generate(GPT& model, ParamSource& params, const std::vector<int>& prompt, int count,
                          const SampleParams& p, Rng& rng, const std::function<void(int)>& on_token = {});

}  // namespace gpt
