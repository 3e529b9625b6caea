// Sampling with a key/value cache (GPT::forward_cached): the forward of gpt.cpp for the new positions only.
// Each block runs its ops on the n new rows, and attention reads the earlier positions' keys and values from
// the cache (Backend::attention_cached_forward) instead of recomputing them; the position embeddings start
// at the cache's length. Only the last position's logits are computed: sampling reads no other row. The ops
// are those forward() runs with recompute none (the GELU in fc's product included), so the logits are the
// ones forward() gives that position, up to the order of sums in the products.
#include <string>

#include "src/core/check.h"
#include "src/model/gpt.h"

namespace gpt {

// One block on the cache's n new rows: cache.x in, cache.x out.
void GPT::block_forward_cached(const BlockParams& p, int l, int n, KvCache& kv) {
  const GPTConfig& c = config();
  const int C = c.channels;
  be_.layernorm_forward(kv.ln, kv.mean, kv.rstd, kv.x, p.ln1w, p.ln1b, n, C);
  be_.matmul_forward(kv.qkv, kv.ln, p.qkvw, p.qkvb, n, C, 3 * C);
  be_.attention_cached_forward(kv.atty, kv.k[l], kv.v[l], kv.qkv, 1, n, kv.length(), kv.capacity(), C, c.num_heads);
  be_.matmul_forward(kv.proj, kv.atty, p.attprojw, p.attprojb, n, C, C);
  be_.residual_layernorm_forward(kv.res2, kv.ln, kv.mean, kv.rstd, kv.x, kv.proj, p.ln2w, p.ln2b, n, C);
  be_.matmul_gelu_forward(kv.fch_gelu, kv.fch, kv.ln, p.fcw, p.fcb, n, C, 4 * C);
  be_.matmul_forward(kv.proj, kv.fch_gelu, p.fcprojw, p.fcprojb, n, 4 * C, C);
  be_.residual_forward(kv.x, kv.res2, kv.proj, (size_t)n * C);
}

// Under tensor parallelism (tensor_parallel.h) as block_forward_tp, on all n rows of every rank (sampling has
// too few rows to split them): this rank's heads' keys and values, the row-parallel products summed over the
// group (all-reduces), then their biases.
void GPT::block_forward_cached_tp(const BlockParams& p, int l, int n, KvCache& kv) {
  const GPTConfig& c = config();
  const int C = c.channels, Cl = C / tp_->size(), NHl = c.num_heads / tp_->size();
  const std::string name = "block" + std::to_string(l);
  be_.layernorm_forward(kv.ln, kv.mean, kv.rstd, kv.x, p.ln1w, p.ln1b, n, C);
  be_.matmul_forward(kv.qkv, kv.ln, p.qkvw, p.qkvb, n, C, 3 * Cl);
  be_.attention_cached_forward(kv.atty, kv.k[l], kv.v[l], kv.qkv, 1, n, kv.length(), kv.capacity(), Cl, NHl);
  be_.matmul_forward(kv.proj, kv.atty, p.attprojw, nullptr, n, Cl, C);
  tp_->sum_all(kv.proj, (size_t)n * C, name + " attproj");
  be_.bias_forward(kv.proj, p.attprojb, n, C);
  be_.residual_layernorm_forward(kv.res2, kv.ln, kv.mean, kv.rstd, kv.x, kv.proj, p.ln2w, p.ln2b, n, C);
  be_.matmul_gelu_forward(kv.fch_gelu, kv.fch, kv.ln, p.fcw, p.fcb, n, C, 4 * Cl);
  be_.matmul_forward(kv.proj, kv.fch_gelu, p.fcprojw, nullptr, n, 4 * Cl, C);
  tp_->sum_all(kv.proj, (size_t)n * C, name + " fcproj");
  be_.bias_forward(kv.proj, p.fcprojb, n, C);
  be_.residual_forward(kv.x, kv.res2, kv.proj, (size_t)n * C);
}

const void* GPT::forward_cached(const int* tokens, int n, KvCache& kv, ParamSource& params) {
  const GPTConfig& c = config();
  const int C = c.channels, L = c.num_layers, past = kv.length();
  GPT_CHECK(n >= 1 && n <= kv.capacity() - past, "sample: ", n, " new tokens after ", past,
            " do not fit the key/value cache of ", kv.capacity(), " positions");
  check_tokens(tokens, n);
  be_.copy_h2d(kv.tokens, tokens, sizeof(int) * (size_t)n);

  const void* embed = params.acquire(layout_.embed_unit(), Pass::forward);
  const void* wte = at(embed, layout_.wte_offset());
  if (tp_) {  // this rank's vocabulary slice looked up, summed over the group, then the positions past..
    be_.embedding_slice_forward(kv.x, kv.tokens, wte, layout_.vocab_lo(), layout_.vocab_rows(), n, C);
    tp_->sum_all(kv.x, (size_t)n * C, "embed");
    be_.position_forward(kv.x, at(embed, layout_.wpe_offset()), past, n, c.max_seq_len, C);
  } else {  // positions past..past+n-1: the rows of wpe from `past` on
    be_.encoder_forward(kv.x, kv.tokens, wte, at(embed, layout_.wpe_offset() + (int64_t)past * C), 1, n, C);
  }
  const void* unit = nullptr;  // the gathered unit of the block running now
  for (int l = 0; l < L; l++) {
    const int u = layout_.layer_unit(l);
    if (layout_.opens_unit(l)) unit = params.acquire(u, Pass::forward);
    if (tp_)
      block_forward_cached_tp(block_params(unit, l), l, n, kv);
    else
      block_forward_cached(block_params(unit, l), l, n, kv);
    if (layout_.closes_unit(l)) params.release(u, Pass::forward);
  }
  const void* lnf = at(embed, layout_.lnf_offset());  // the final layernorm, in the root unit
  const void* last = at(kv.x, (int64_t)(n - 1) * C);  // (1, C): the only row sampling reads
  be_.layernorm_forward(kv.ln, kv.mean, kv.rstd, last, lnf, at(lnf, C), 1, C);
  if (tp_) {  // this rank's slice of the logits, gathered from the group's slices in vocabulary order
    be_.matmul_forward(kv.logits_slice, kv.ln, wte, nullptr, 1, C, layout_.vocab_rows());
    tp_->gather(kv.logits, kv.logits_slice, (size_t)layout_.vocab_rows(), "logits");
  } else {
    be_.matmul_forward(kv.logits, kv.ln, wte, nullptr, 1, C, c.padded_vocab_size);
  }
  params.release(layout_.embed_unit(), Pass::forward);
  kv.advance(n);
  return kv.logits;
}

}  // namespace gpt
