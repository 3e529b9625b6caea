// The PyTorch golden of text generation (tests/fixtures/golden_d2/generate.json, written by
// scripts/make_generate_golden.py) and the run that both backends' tests hold to it: every step of every case
// through next_token_logits (the cache path generate() takes) and, for the bound, through a forward over the
// same window, each against PyTorch's fp64 logits.
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "src/train/generate.h"
#include "tests/common/harness.h"
#include "tests/common/json_lite.h"
#include "tests/common/test_paths.h"

namespace gpt::test {

inline std::string golden_d2(const std::string& f) { return source_dir() + "/tests/fixtures/golden_d2/" + f; }

struct GenerateCase {
  std::string name;
  std::vector<int> prompt, tokens;          // the prompt; the token appended after each step
  std::vector<std::vector<double>> logits;  // [step] PyTorch's fp64 logits over the V real columns
};

inline std::vector<GenerateCase> load_generate_cases() {
  const std::string text = read_log(golden_d2("generate.json"));
  EXPECT_FALSE(text.empty()) << golden_d2("generate.json");
  const JValue doc = JsonParser(text).parse();
  std::vector<GenerateCase> cases;
  for (const JValue& c : doc.at("cases").arr) {
    GenerateCase k;
    k.name = c.at("name").str;
    for (const JValue& t : c.at("prompt").arr) k.prompt.push_back((int)t.num);
    for (const JValue& s : c.at("steps").arr) {
      k.tokens.push_back((int)s.at("token").num);
      std::vector<double> row;
      for (const JValue& x : s.at("logits").arr) row.push_back(x.num);
      k.logits.push_back(row);
    }
    cases.push_back(k);
  }
  EXPECT_EQ(cases.size(), 3u);
  return cases;
}

// The first V of a (Vp) logits row on the device (compute dtype), as fp32 on the host.
inline std::vector<float> logits_to_host(Backend& be, const void* row, const GPTConfig& c) {
  const size_t Vp = (size_t)c.padded_vocab_size;
  float* tmp = static_cast<float*>(be.alloc(Vp * sizeof(float), MemCat::workspace));  // (Vp) fp32, device
  be.compute_to_f32(tmp, row, Vp);
  std::vector<float> h(Vp);  // (Vp) then (V)
  be.copy_d2h(h.data(), tmp, Vp * sizeof(float));
  be.synchronize();
  be.free(tmp);
  h.resize((size_t)c.vocab_size);
  return h;
}

inline double max_abs_diff(const std::vector<float>& a, const std::vector<double>& b) {
  double m = 0;
  for (size_t i = 0; i < b.size(); i++) m = std::max(m, std::fabs((double)a[i] - b[i]));
  return m;
}

// The largest |logit - PyTorch's| over every step of every case: through the cache (cached) and through a
// forward over the step's window (full); and the largest |logit| of the golden.
struct GenerateErrors {
  double cached = 0, full = 0, max_logit = 0;
};

inline GenerateErrors generate_errors(Harness& h) {
  const GPTConfig& c = h.model->config();
  GenerateErrors e;
  for (const GenerateCase& k : load_generate_cases()) {
    const int capacity = std::min<int>(c.max_seq_len, (int)(k.prompt.size() + k.tokens.size()));
    KvCache kv(*h.be, c, capacity);
    std::vector<int> toks = k.prompt;
    for (size_t s = 0; s < k.tokens.size(); s++) {
      const std::vector<float> cached = logits_to_host(*h.be, next_token_logits(*h.model, *h.engine, toks, kv), c);
      const int len = std::min<int>((int)toks.size(), c.max_seq_len);
      std::vector<int> window(toks.end() - len, toks.end());
      h.model->forward(window.data(), nullptr, 1, len, *h.engine);
      const char* last = static_cast<const char*>(h.model->logits()) +
                         (size_t)(len - 1) * c.padded_vocab_size * h.be->compute_size();
      e.full = std::max(e.full, max_abs_diff(logits_to_host(*h.be, last, c), k.logits[s]));
      e.cached = std::max(e.cached, max_abs_diff(cached, k.logits[s]));
      for (double x : k.logits[s]) e.max_logit = std::max(e.max_logit, std::fabs(x));
      EXPECT_EQ(kv.length(), len) << k.name << " step " << s;
      toks.push_back(k.tokens[s]);
    }
  }
  return e;
}

// The bound on the cached path's error, from the full forward's own (the path the golden tests hold to
// PyTorch): both run the same ops on the same rows and differ only in the order of the sums inside the
// products and the attention (one row against all rows at once; on cuda the cached attention also keeps its
// probabilities in fp32, one rounding fewer), so their errors are the same kind. tests/fsdp/noise_floor.h
// derives the multiple: at most twice the roundings, x2; one more draw against a floor estimated from
// samples, x8. The floor is at least the 2 unit roundoffs of rounding each logit once (`unit`: 2^-24 fp32,
// 2^-8 bf16). A decoding bug (a window off by one token, one that does not slide, keys of the wrong
// position) moves the logits by 1.6e-3 to 0.29 (measured with the fixture's script).
inline void expect_cached_within_bound(const GenerateErrors& e, double unit) {
  const double floor = std::max(e.full, 2 * unit * e.max_logit), bound = 2 * 8 * floor;
  EXPECT_LE(e.cached, bound) << "the full forward's error is " << e.full;
  std::printf("cached logits: max error %.3g against PyTorch fp64, full forward %.3g, bound %.3g\n", e.cached,
              e.full, bound);
}

}  // namespace gpt::test
