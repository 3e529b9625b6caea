// See op_costs.h. Each function lists the backend calls of its gpt.cpp counterpart, in order.
#include "src/plan/op_costs.h"

#include <algorithm>

namespace gpt {

namespace {

constexpr int kAttnBlock = 64;  // kernels/cpu/attention.cpp's row block (query rows per task)

OpCost gemm(const std::string& name, double M, double N, double K) {
  OpCost o;
  o.name = name;
  o.cls = OpClass::gemm;
  o.mnk = M * N * K;
  o.flops = 2 * M * N * K;
  return o;
}

OpCost mem(const std::string& name, OpClass cls, double bytes, int launches = 1) {
  OpCost o;
  o.name = name;
  o.cls = cls;
  o.bytes = bytes;
  o.launches = launches;
  return o;
}

// out (N, OC) = inp (N, C) @ w^T (+ bias): one product.
void matmul_forward(std::vector<OpCost>& ops, const std::string& name, const OpShape& s, double C, double OC) {
  ops.push_back(gemm(name, (double)s.N(), OC, C));
}

// dinp = dout @ w, dw += dout^T @ inp (one call: two products of N*C*OC), dbias += column sums of dout.
void matmul_backward(std::vector<OpCost>& ops, const std::string& name, const OpShape& s, double C, double OC,
                     bool bias) {
  const double N = (double)s.N();
  OpCost o = gemm(name + " backward", N, OC, C);
  o.cls = OpClass::gemm_backward;
  o.flops *= 2;
  o.launches = 2;
  ops.push_back(o);
  if (bias) ops.push_back(mem(name + " dbias", OpClass::stream, N * OC * s.cs));
}

OpCost kernel(OpCost o, const char* family, double elements) {
  o.kernel = family;
  o.elements = elements;
  return o;
}

void layernorm_forward(std::vector<OpCost>& ops, const std::string& name, const OpShape& s) {
  const double n = (double)s.N() * s.C;
  ops.push_back(kernel(mem(name, OpClass::stream, 2 * n * s.cs + 8.0 * s.N()), "layernorm_forward", n));  // x in, out, stats
}

void layernorm_backward(std::vector<OpCost>& ops, const std::string& name, const OpShape& s) {
  const double n = (double)s.N() * s.C;
  ops.push_back(kernel(mem(name, OpClass::stream, 3 * n * s.cs + 8.0 * s.N()), "layernorm_backward", n));  // dout, x; dinp
}

void residual_forward(std::vector<OpCost>& ops, const std::string& name, const OpShape& s) {
  ops.push_back(mem(name, OpClass::stream, 3.0 * s.N() * s.C * s.cs));
}

void residual_backward(std::vector<OpCost>& ops, const std::string& name, const OpShape& s) {
  ops.push_back(mem(name, OpClass::stream, 3.0 * s.N() * s.C * s.cs));  // dbranch in, dstream in and out
}

void gelu_forward(std::vector<OpCost>& ops, const OpShape& s) {
  const double n = (double)s.N() * 4 * s.C;
  ops.push_back(kernel(mem("gelu", OpClass::stream, 2.0 * n * s.cs), "gelu_forward", n));
}

// fc + GELU: on the cpu two passes (product, then GELU); on cuda the GELU rides in the product's epilogue,
// which also writes the pre-activation (one extra output pass).
void matmul_gelu_forward(std::vector<OpCost>& ops, const OpShape& s) {
  matmul_forward(ops, "fc", s, (double)s.C, 4.0 * s.C);
  if (s.cpu)
    gelu_forward(ops, s);
  else
    ops.push_back(mem("fc gelu epilogue", OpClass::stream, 1.0 * s.N() * 4 * s.C * s.cs, 0));
}

// The attention's products and softmax passes over (B, NH) heads of T x T scores.
void attention(std::vector<OpCost>& ops, const OpShape& s, bool backward) {
  const double B = (double)s.B, T = (double)s.T, NH = (double)s.NH, hs = (double)(s.C / s.NH);
  const double heads = B * NH;
  if (s.cpu) {
    // Row blocks of kAttnBlock queries; block i sees key columns [0, (i+1)*block): the causal half.
    const int64_t nblk = (s.T + kAttnBlock - 1) / kAttnBlock;
    OpCost prod;
    prod.name = backward ? "attention backward products" : "attention products";
    prod.cls = OpClass::gemm_tasks;
    double probs = 0;  // score elements touched
    double mnk_sum = 0;
    for (int64_t ib = 0; ib < nblk; ib++) {
      const double r0 = (double)ib * kAttnBlock, nr = std::min<double>(kAttnBlock, T - r0), ncols = r0 + nr;
      // forward: S = Q K^T (nr, ncols, hs), O = P V (nr, hs, ncols); backward adds dP, dQ, and per
      // column block dK and dV over the rows below it (the same element count, transposed).
      const double per = 2 * nr * ncols * hs;
      prod.flops += heads * (backward ? 4 : 2) * per;
      mnk_sum += (backward ? 4 : 2) * nr * ncols * hs;
      probs += heads * nr * T;
    }
    prod.mnk = mnk_sum / (backward ? 4.0 * nblk : 2.0 * nblk);  // the mean product's size
    ops.push_back(prod);
    // softmax: forward writes P rows (and reads them for P V); backward reads P, and dP in / dS out
    ops.push_back(mem(backward ? "softmax backward" : "softmax", OpClass::stream, (backward ? 3 : 2) * probs * s.cs));
    return;
  }
  if (s.fused_attention) {
    OpCost prod;
    prod.name = backward ? "fused attention backward" : "fused attention";
    prod.cls = OpClass::gemm;
    const double causal = heads * T * T * hs / 2;  // the causal half of one T x T x hs product
    prod.mnk = causal;
    prod.flops = (backward ? 5.0 : 2.0) * 2 * causal;
    ops.push_back(prod);
    ops.push_back(mem(backward ? "fused attention backward io" : "fused attention io", OpClass::stream,
                      (backward ? 7.0 : 4.0) * s.N() * s.C * s.cs));
    return;
  }
  // simple path: batched products over the heads, a causal-softmax kernel that keeps bf16 probabilities
  const double one = heads * T * T * hs;
  OpCost prod;
  prod.name = backward ? "attention backward products" : "attention products";
  prod.cls = OpClass::gemm;
  prod.mnk = one;
  prod.flops = (backward ? 4.0 : 2.0) * 2 * one;
  prod.launches = backward ? 4 : 2;
  ops.push_back(prod);
  ops.push_back(mem(backward ? "softmax backward" : "softmax", OpClass::stream,
                    (backward ? 3.0 : 2.0) * heads * T * T * s.cs + (backward ? 0 : heads * T * T * 4)));
}

}  // namespace

OpShape OpShape::of(const GPTConfig& cfg, int B, int T, bool cpu, bool fused_attention) {
  OpShape s;
  s.B = B;
  s.T = T;
  s.C = cfg.channels;
  s.NH = cfg.num_heads;
  s.L = cfg.num_layers;
  s.V = cfg.vocab_size;
  s.Vp = cfg.padded_vocab_size;
  s.cs = cpu ? 4 : 2;
  s.cpu = cpu;
  s.fused_attention = fused_attention;
  return s;
}

std::vector<OpCost> block_forward_ops(const OpShape& s, const KeptFields* keep) {
  std::vector<OpCost> ops;
  using F = BlockField;
  auto run = [&](bool kept) { return !keep || !kept; };
  auto k = [&](F f) { return keep ? (*keep)[f] : true; };
  const double C = (double)s.C;
  if (run(k(F::ln1) && k(F::ln1_stats))) layernorm_forward(ops, "ln1", s);
  if (run(k(F::qkv))) matmul_forward(ops, "qkv", s, C, 3 * C);
  if (run(k(F::atty) && k(F::att_state))) attention(ops, s, false);
  const bool ln2 = run(k(F::ln2) && k(F::ln2_stats));
  if (run(k(F::res2))) {
    matmul_forward(ops, "attproj", s, C, C);
    residual_forward(ops, "residual 1", s);
    if (ln2) ops.back().launches = 0;  // residual_layernorm_forward: the pair, row by row, in one launch
  }
  if (ln2) layernorm_forward(ops, "ln2", s);
  if (k(F::fch) == k(F::fch_gelu)) {  // gpt.cpp: one call when fch and its GELU are kept or dropped together
    if (run(k(F::fch))) matmul_gelu_forward(ops, s);
  } else {
    if (run(k(F::fch))) matmul_forward(ops, "fc", s, C, 4 * C);
    if (run(k(F::fch_gelu))) gelu_forward(ops, s);
  }
  if (!keep) {
    matmul_forward(ops, "fcproj", s, 4 * C, C);
    residual_forward(ops, "residual 2", s);
  }
  return ops;
}

std::vector<OpCost> block_backward_ops(const OpShape& s) {
  std::vector<OpCost> ops;
  const double C = (double)s.C;
  // gelu_matmul_backward: on the cpu matmul_backward then gelu_backward; on cuda the GELU's backward is the
  // product's epilogue, reading the kept pre-activation
  matmul_backward(ops, "fcproj", s, 4 * C, C, true);
  const double n = (double)s.N() * 4 * s.C;
  if (s.cpu)
    ops.push_back(kernel(mem("gelu backward", OpClass::stream, 3.0 * n * s.cs), "gelu_backward", n));
  else
    ops.push_back(mem("fcproj dgelu epilogue", OpClass::stream, n * s.cs, 0));
  matmul_backward(ops, "fc", s, C, 4 * C, true);
  // layernorm_backward_residual: the layernorm's input gradient added into dres in the same launch
  layernorm_backward(ops, "ln2 backward", s);
  residual_backward(ops, "residual 2 backward", s);
  ops.back().launches = 0;
  matmul_backward(ops, "attproj", s, C, C, true);
  attention(ops, s, true);
  matmul_backward(ops, "qkv", s, C, 3 * C, true);
  layernorm_backward(ops, "ln1 backward", s);
  residual_backward(ops, "residual 1 backward", s);
  ops.back().launches = 0;
  return ops;
}

std::vector<OpCost> embed_forward_ops(const OpShape& s) {
  return {mem("encoder", OpClass::stream, 3.0 * s.N() * s.C * s.cs)};  // wte row, wpe row in; out
}

std::vector<OpCost> embed_backward_ops(const OpShape& s) {
  // dout in; wte's gradient rows read and written in fp32; wpe's gradient summed over the batch
  return {mem("encoder backward", OpClass::stream, (double)s.N() * s.C * (s.cs + 8) + 8.0 * s.T * s.C)};
}

std::vector<OpCost> head_forward_ops(const OpShape& s) {
  std::vector<OpCost> ops;
  layernorm_forward(ops, "lnf", s);
  return ops;
}

std::vector<OpCost> head_backward_ops(const OpShape& s) {
  std::vector<OpCost> ops;
  layernorm_backward(ops, "lnf backward", s);
  return ops;
}

std::vector<OpCost> lm_head_forward_ops(const OpShape& s) {
  std::vector<OpCost> ops;
  matmul_forward(ops, "lm_head", s, (double)s.C, (double)s.Vp);  // training has no classifier forward
  return ops;
}

std::vector<OpCost> lm_head_backward_ops(const OpShape& s) {
  std::vector<OpCost> ops;
  const double logits = (double)s.N() * s.Vp * s.cs;
  ops.push_back(kernel(mem("classifier backward", OpClass::stream, (s.cpu ? 5 : 2) * logits), "classifier_backward",
                       (double)s.N() * s.V));
  matmul_backward(ops, "lm_head", s, (double)s.C, (double)s.Vp, false);
  return ops;
}

double products_flops(const std::vector<OpCost>& ops) {
  double f = 0;
  for (const OpCost& o : ops) f += o.flops;
  return f;
}

}  // namespace gpt
