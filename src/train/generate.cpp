// See generate.h.
#include "src/train/generate.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "src/core/check.h"

namespace gpt {

int sample_token(std::vector<float> logits, const SampleParams& p, Rng& rng) {
  GPT_CHECK(p.temperature >= 0 && std::isfinite(p.temperature), "--temperature must be >= 0, got ", p.temperature);
  GPT_CHECK(p.top_k >= 0, "--top-k must be >= 0, got ", p.top_k);
  GPT_CHECK(p.top_p > 0 && p.top_p <= 1, "--top-p must be in (0, 1], got ", p.top_p);
  const int V = (int)logits.size();
  if (p.temperature == 0) return (int)(std::max_element(logits.begin(), logits.end()) - logits.begin());
  std::vector<int> idx(V);
  std::iota(idx.begin(), idx.end(), 0);
  std::sort(idx.begin(), idx.end(), [&](int a, int b) { return logits[a] > logits[b] || (logits[a] == logits[b] && a < b); });
  int keep = p.top_k > 0 ? std::min(p.top_k, V) : V;
  std::vector<double> prob(keep);
  const double mx = logits[idx[0]];
  double sum = 0;
  for (int i = 0; i < keep; i++) sum += prob[i] = std::exp((logits[idx[i]] - mx) / p.temperature);
  if (p.top_p < 1) {  // smallest prefix whose mass reaches top_p
    double acc = 0;
    int n = 0;
    while (n < keep && acc < p.top_p * sum) acc += prob[n++];
    keep = std::max(n, 1);
    sum = acc;
  }
  double r = rng.uniform_double() * sum;
  for (int i = 0; i < keep; i++) {
    r -= prob[i];
    if (r < 0) return idx[i];
  }
  return idx[keep - 1];
}

const void* next_token_logits(GPT& model, ParamSource& params, const std::vector<int>& toks, KvCache& kv) {
  if (kv.length() == 0 || kv.length() == kv.capacity()) {
    kv.reset();
    const int len = std::min<int>((int)toks.size(), kv.capacity());
    return model.forward_cached(toks.data() + toks.size() - len, len, kv, params);
  }
  GPT_CHECK((size_t)kv.length() + 1 == toks.size(), "sample: the cache holds ", kv.length(), " positions, ",
            "expected one fewer than the ", toks.size(), " tokens");
  return model.forward_cached(&toks.back(), 1, kv, params);
}

std::vector<int> generate(GPT& model, ParamSource& params, const std::vector<int>& prompt, int count,
                          const SampleParams& p, Rng& rng, const std::function<void(int)>& on_token) {
  const GPTConfig& c = model.config();
  GPT_CHECK(!prompt.empty(), "sample: the prompt must have at least one token");
  GPT_CHECK(count >= 0, "sample: the token count must be >= 0, got ", count);
  Backend& be = model.backend();
  std::vector<int> toks = prompt;
  KvCache kv(be, c, (int)std::min<int64_t>(c.max_seq_len, (int64_t)prompt.size() + count),
             model.tensor_parallel() ? model.tensor_parallel()->size() : 1);
  std::vector<float> row((size_t)c.padded_vocab_size);
  for (int i = 0; i < count; i++) {
    // logits (compute dtype) -> fp32 on the device -> host
    be.compute_to_f32(kv.logits_f32, next_token_logits(model, params, toks, kv), (size_t)c.padded_vocab_size);
    be.copy_d2h(row.data(), kv.logits_f32, row.size() * sizeof(float));
    be.synchronize();
    std::vector<float> real(row.begin(), row.begin() + c.vocab_size);
    const int id = sample_token(std::move(real), p, rng);
    toks.push_back(id);
    if (on_token) on_token(id);
  }
  return std::vector<int>(toks.begin() + prompt.size(), toks.end());
}

}  // namespace gpt
