// See op_costs.h. Each function prices one Backend call from its arguments, as the backend's kernels run it.
#include "src/plan/op_costs.h"

#include <algorithm>

#include "src/core/check.h"

namespace gpt {

namespace {

constexpr int kAttnBlock = 64;  // kernels/cpu/attention.cpp's row block (query rows per task)

OpCost gemm(const char* name, double M, double N, double K) {
  OpCost o;
  o.name = name;
  o.cls = OpClass::gemm;
  o.mnk = M * N * K;
  o.m = M, o.n = N, o.k = K;
  o.flops = 2 * M * N * K;
  return o;
}

OpCost mem(const char* name, OpClass cls, double bytes, int launches = 1) {
  OpCost o;
  o.name = name;
  o.cls = cls;
  o.bytes = bytes;
  o.launches = launches;
  return o;
}

OpCost kernel(OpCost o, const char* family, double elements) {
  o.kernel = family;
  o.elements = elements;
  return o;
}

// A parallel loop over the states' memory: the device's stream rate, or the host's when offloaded.
OpClass states_class(const OpTarget& t) { return t.host ? OpClass::host_stream : OpClass::stream; }

// dinp = dout @ w, dw += dout^T @ inp (one call: two products of N*C*OC), dbias += column sums of dout.
void add_matmul_backward(OpCosts& ops, const OpTarget& t, double N, double C, double OC, bool bias) {
  OpCost o = gemm("matmul backward", N, OC, C);
  o.cls = OpClass::gemm_backward;
  o.flops *= 2;
  o.launches = 2;
  ops.push_back(o);
  if (bias) ops.push_back(mem("matmul dbias", OpClass::stream, N * OC * t.cs));
}

// The attention's products and softmax passes over (B, NH) heads of T x T scores.
OpCosts attention(const OpTarget& t, int B_, int T_, int C, int NH_, bool backward) {
  OpCosts ops;
  const double B = B_, T = T_, NH = NH_, hs = (double)(C / NH_);
  const double heads = B * NH;
  if (t.cpu) {
    // Row blocks of kAttnBlock queries; block i sees key columns [0, (i+1)*block): the causal half.
    const int64_t nblk = (T_ + kAttnBlock - 1) / kAttnBlock;
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
    ops.push_back(mem(backward ? "softmax backward" : "softmax", OpClass::stream, (backward ? 3 : 2) * probs * t.cs));
    return ops;
  }
  if (t.fused_attention) {
    OpCost prod;
    prod.name = backward ? "fused attention backward" : "fused attention";
    prod.cls = OpClass::gemm;
    const double causal = heads * T * T * hs / 2;  // the causal half of one T x T x hs product
    prod.mnk = causal;
    prod.flops = (backward ? 5.0 : 2.0) * 2 * causal;
    ops.push_back(prod);
    ops.push_back(mem(backward ? "fused attention backward io" : "fused attention io", OpClass::stream,
                      (backward ? 7.0 : 4.0) * B * T * C * t.cs));
    return ops;
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
                    (backward ? 3.0 : 2.0) * heads * T * T * t.cs + (backward ? 0 : heads * T * T * 4)));
  return ops;
}

}  // namespace

namespace op_cost {

OpCosts encoder_forward(const OpTarget& t, int B, int T, int C) {
  return {mem("encoder", OpClass::stream, 3.0 * B * T * C * t.cs)};  // wte row, wpe row in; out
}

OpCosts encoder_backward(const OpTarget& t, int B, int T, int C) {
  // dout in; wte's gradient rows read and written in fp32; wpe's gradient summed over the batch
  return {mem("encoder backward", OpClass::stream, (double)B * T * C * (t.cs + 8) + 8.0 * T * C)};
}

OpCosts layernorm_forward(const OpTarget& t, int N, int C) {
  const double n = (double)N * C;  // x in, out, stats
  return {kernel(mem("layernorm", OpClass::stream, 2 * n * t.cs + 8.0 * N), "layernorm_forward", n)};
}

OpCosts layernorm_backward(const OpTarget& t, int N, int C) {
  const double n = (double)N * C;  // dout, x; dinp
  return {kernel(mem("layernorm backward", OpClass::stream, 3 * n * t.cs + 8.0 * N), "layernorm_backward", n)};
}

OpCosts residual_layernorm_forward(const OpTarget& t, int N, int C) {
  OpCosts ops = residual_forward(t, (double)N * C);
  ops.back().launches = 0;  // the pair, row by row, in one launch
  for (const OpCost& o : layernorm_forward(t, N, C)) ops.push_back(o);
  return ops;
}

OpCosts layernorm_backward_residual(const OpTarget& t, int N, int C) {
  OpCosts ops = layernorm_backward(t, N, C);
  OpCost r = residual_backward(t, (double)N * C)[0];  // the input gradient added into dres in the same launch
  r.launches = 0;
  ops.push_back(r);
  return ops;
}

OpCosts matmul_forward(const OpTarget& t, int N, int C, int OC) { return {gemm("matmul", N, OC, C)}; }

// On the cpu two passes (product, then GELU); on cuda the GELU rides in the product's epilogue, which also
// writes the pre-activation (one extra output pass).
OpCosts matmul_gelu_forward(const OpTarget& t, int N, int C, int OC) {
  OpCosts ops = matmul_forward(t, N, C, OC);
  if (t.cpu)
    ops.push_back(gelu_forward(t, (double)N * OC)[0]);
  else
    ops.push_back(mem("gelu epilogue", OpClass::stream, (double)N * OC * t.cs, 0));
  return ops;
}

OpCosts matmul_backward(const OpTarget& t, int N, int C, int OC, bool bias) {
  OpCosts ops;
  add_matmul_backward(ops, t, N, C, OC, bias);
  return ops;
}

// On the cpu matmul_backward then gelu_backward; on cuda the GELU's backward is the product's epilogue,
// reading the kept pre-activation.
OpCosts gelu_matmul_backward(const OpTarget& t, int N, int C, int OC, bool bias) {
  OpCosts ops = matmul_backward(t, N, C, OC, bias);
  const double n = (double)N * C;
  if (t.cpu)
    ops.push_back(gelu_backward(t, n)[0]);
  else
    ops.push_back(mem("dgelu epilogue", OpClass::stream, n * t.cs, 0));
  return ops;
}

OpCosts attention_forward(const OpTarget& t, int B, int T, int C, int NH) { return attention(t, B, T, C, NH, false); }
OpCosts attention_backward(const OpTarget& t, int B, int T, int C, int NH) { return attention(t, B, T, C, NH, true); }

// Sampling: Tn queries over past+Tn keys per head; bound by reading the cache.
OpCosts attention_cached_forward(const OpTarget& t, int B, int Tn, int past, int C, int NH) {
  const double keys = (double)past + Tn;
  return {mem("attention over the cache", OpClass::stream, 2.0 * B * keys * C * t.cs + 4.0 * B * Tn * C * t.cs)};
}

OpCosts gelu_forward(const OpTarget& t, double n) {
  return {kernel(mem("gelu", OpClass::stream, 2.0 * n * t.cs), "gelu_forward", n)};
}

OpCosts gelu_backward(const OpTarget& t, double n) {
  return {kernel(mem("gelu backward", OpClass::stream, 3.0 * n * t.cs), "gelu_backward", n)};
}

OpCosts residual_forward(const OpTarget& t, double n) { return {mem("residual", OpClass::stream, 3.0 * n * t.cs)}; }

OpCosts residual_backward(const OpTarget& t, double n) {
  return {mem("residual backward", OpClass::stream, 3.0 * n * t.cs)};  // dbranch in, dstream in and out
}

OpCosts classifier_forward(const OpTarget& t, int N, int V, int Vp) {
  const double logits = (double)N * Vp * t.cs;
  return {kernel(mem("classifier", OpClass::stream, (t.cpu ? 3 : 1) * logits), "classifier_forward", (double)N * V)};
}

OpCosts classifier_backward(const OpTarget& t, int N, int V, int Vp) {
  const double logits = (double)N * Vp * t.cs;
  return {kernel(mem("classifier backward", OpClass::stream, (t.cpu ? 5 : 2) * logits), "classifier_backward",
                 (double)N * V)};
}

// ---- tensor parallelism ----
OpCosts embedding_slice_forward(const OpTarget& t, int N, int C) {
  return {mem("embedding slice", OpClass::stream, 2.0 * N * C * t.cs)};  // a wte row in (at most), out
}

OpCosts embedding_slice_backward(const OpTarget& t, int N, int C) {
  // dout in; the slice's gradient rows read and written in fp32 (at most one row per token); cuda ranks the
  // positions by token first (encoder_backward's sort), a second launch
  return {mem("embedding slice backward", OpClass::stream, (double)N * C * (t.cs + 8), t.cpu ? 1 : 2)};
}

OpCosts position_forward(const OpTarget& t, int n, int C) {
  return {mem("position", OpClass::stream, 3.0 * n * C * t.cs)};  // x in and out, a wpe row in
}

OpCosts position_backward(const OpTarget& t, int n, int T, int C) {
  // dout in; the gradient rows the range lands on (at most T) read and written in fp32
  return {mem("position backward", OpClass::stream, (double)n * C * t.cs + 8.0 * std::min(n, T) * C)};
}

OpCosts bias_forward(const OpTarget& t, int N, int OC) {
  return {mem("bias", OpClass::stream, 2.0 * N * OC * t.cs + (double)OC * t.cs)};  // x in and out, the bias
}

OpCosts bias_backward(const OpTarget& t, int N, int OC) {
  // matmul's dbias: dout in (cuda: per-chunk partials, then their sum, a second launch)
  return {mem("bias backward", OpClass::stream, (double)N * OC * t.cs + 8.0 * OC, t.cpu ? 1 : 2)};
}

OpCosts classifier_slice_stats(const OpTarget& t, int N, int Vs) {
  return {mem("classifier slice stats", OpClass::stream, (double)N * Vs * t.cs + 8.0 * N)};  // logits in; max, target
}

OpCosts classifier_slice_sumexp(const OpTarget& t, int N, int valid, int Vs) {
  const double logits = (double)N * Vs * t.cs;  // logits and maxes in, sums out
  return {kernel(mem("classifier slice sumexp", OpClass::stream, logits + 8.0 * N), "classifier_forward",
                 (double)N * valid)};
}

OpCosts classifier_slice_backward(const OpTarget& t, int N, int valid, int Vs, bool dlogits) {
  const double stats = 16.0 * N;  // maxes, sums, target in; losses out (targets: ints, negligible)
  if (!dlogits) return {mem("classifier slice losses", OpClass::stream, stats)};
  const double logits = (double)N * Vs * t.cs;
  return {kernel(mem("classifier slice backward", OpClass::stream, (t.cpu ? 4 : 2) * logits + stats),
                 "classifier_backward", (double)N * valid)};
}

// Reads param, grad, m, v; writes param, m, v (and the compute copy's element when there is one).
OpCosts adamw_update(const OpTarget& t, double n, bool param_out) {
  return {kernel(mem("adamw", states_class(t), (28.0 + (param_out ? (double)t.cs : 0)) * n), "adamw", n)};
}

OpCosts sum_squares(const OpTarget& t, double n) { return {mem("sum of squares", states_class(t), 4.0 * n)}; }

OpCosts accumulate_f32(const OpTarget& t, double n) {  // y in, x in, y out
  return {mem("gradient add", states_class(t), 12.0 * n)};
}

OpCosts zero(const OpTarget& t, double bytes) {
  const OpClass cls = t.host && !t.cpu ? OpClass::host_stream : t.cpu ? OpClass::copy : OpClass::stream;
  return {mem("zero", cls, bytes)};
}

OpCosts copy_d2d(const OpTarget& t, double bytes) { return {mem("copy", OpClass::copy, bytes)}; }

// fp32 -> compute dtype (n*(4+cs) bytes, a kernel); fp32 <-> bf16 (6n, a fill-class loop on the cpu).
OpCosts convert(const OpTarget& t, const char* name, double n, double bytes_per_element) {
  const bool fill = bytes_per_element == 6.0 && t.cpu;
  return {mem(name, fill ? OpClass::copy : OpClass::stream, n * bytes_per_element)};
}

OpCosts host_device_copy(const char* name, double bytes) { return {mem(name, OpClass::pcie, bytes)}; }

}  // namespace op_cost

void OpCosts::push_back(const OpCost& o) {
  GPT_CHECK(n_ < kMaxOps, "op costs: more than ", kMaxOps, " records for one call (", o.name, ")");
  ops_[n_++] = o;
}

double products_flops(const OpCosts& ops) {
  double f = 0;
  for (const OpCost& o : ops) f += o.flops;
  return f;
}

}  // namespace gpt
