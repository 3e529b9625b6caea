// Sampling on the GPU: the key/value-cache path (GPT::forward_cached with the cuda ops, cuBLASLt products of
// one row, the cached attention kernel) against the PyTorch golden of text generation, every step of every
// case, within the bound tests/common/generate_golden.h derives from the GPU's own full forward (bf16: the
// floor is at least 2 bf16 unit roundoffs of each logit). Skips without a GPU.
// What it can and cannot catch: the bound is bf16-sized (at least 16 x 2^-7 x 0.47 = 0.06 on this fixture), so
// a step that fails, a crash in a one-row product or a kernel that reads the wrong keys fail it, while the
// smaller moves of a window off by one token may not; those are the cpu test's to catch (the window logic is
// the same code, held there to 1.4e-6), and the kernel's numbers are the twin test's
// (CudaTwin.CachedAttentionMatchesReference).
#include <gtest/gtest.h>

#include "src/io/model_file.h"
#include "tests/common/generate_golden.h"
#include "tests/cuda/twin_util.h"

namespace gpt::test {
namespace {

TEST(CudaGenerate, CachedLogitsMatchPyTorch) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA GPU visible";
  const ModelWeights w = load_model_file(golden_d2("model.bin"));
  FsdpOptions fo;
  fo.inference = true;  // as gpt sample loads it
  Harness h(w.config, {}, fo, "cuda");
  h.be->set_attention_path(AttentionPath::simple);  // the full forward: every head size (hs 16 here)
  h.set_weights(w.units);
  expect_cached_within_bound(generate_errors(h), kUb);
}

}  // namespace
}  // namespace gpt::test
