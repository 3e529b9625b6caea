// The operation graphs of the cudnn attention path and their execution plans: the cuDNN side of
// attention_cudnn.cu (which runs the plans and caches them per shape), kept apart so that each file has one
// job. cuDNN's fused flash attention ("SDPA") is driven through the BACKEND descriptors of its graph API
// (cudnn_graph.h: cudnnBackendCreateDescriptor / SetAttribute / Finalize); cuDNN recognises the graphs below
// as the flash-attention pattern of its runtime-fusion engines and runs each as fused kernels that never
// store a (T,T) matrix. Also here: the deviceless check of the same graphs (attention_cudnn_check.h).
//
// The graphs are written node for node as NVIDIA's cuDNN frontend (the "composite" SDPA nodes, for cuDNN
// before 9.21) lowers sdpa() and sdpa_backward() with a top-left causal mask, an attention scale and stats,
// and no dropout, bias or padding mask; the engines match that pattern. With s = 1/sqrt(hs), per (b, h),
// every tensor a (B, NH, ., .) view (attention_cudnn_key.h), f32 = fp32, bf = bf16:
//   forward                                          backward
//   S   = q @ kt                  matmul   f32       r    = rowsum(dout * out)               mul, reduce
//   S   = S * s                   mul      f32       Dsum = r * 1       (non-virtual f32)    mul
//   S   = causal(S)               (*)      f32       S    = (q @ kt) * s - stats              matmul, mul, sub
//   M   = rowmax(S)               reduce   f32       S    = causal(S)                         (*)
//   E   = exp(S - M)              sub, exp f32       P    = exp(S)                            exp      f32
//   Z   = rowsum(E)               reduce   f32       dv   = reshape(P)^T @ dout   (P^T bf)    reshape, matmul
//   stats = M + log(Z)  (output)  log, add f32       dS   = (dout @ vt - Dsum) * P * s        matmul, sub, mul, mul
//   P   = E / Z                   div      bf        dk   = reshape(dS)^T @ q    (dS^T bf)    reshape, matmul
//   out = P @ v                   matmul   bf        dQa  = dS @ reshape(kt)  (non-virtual f32) reshape, matmul
//                                                    dq   = dQa                               identity
// (*) causal(X): row = gen_index(X, axis 2), col = gen_index(X, axis 3) (int32), keep = row >= col
//     (boolean), X = keep ? X : -inf (binary_select).
// Reductions run over the last axis ((B, NH, T, T) -> (B, NH, T, 1)); pointwise math is fp32 (boolean for the
// comparison); the products accumulate in fp32. The scale, -inf and 1 are fp32 scalars passed by value.
// stats is the attention state: (B, NH, T) fp32, the natural-log log-sum-exp of the scaled scores, the same
// quantity the fused path keeps.
//
// Every cudnnBackendSetAttribute below names its attribute, type and element count at the call; they follow
// the "Backend Descriptor Types" reference of cuDNN 9 (cudnn_graph library):
//   TENSOR          DATA_TYPE (DATA_TYPE, 1), DIMENSIONS (INT64, 4), STRIDES (INT64, 4), UNIQUE_ID (INT64, 1),
//                   BYTE_ALIGNMENT (INT64, 1), IS_VIRTUAL (BOOLEAN, 1), IS_BY_VALUE (BOOLEAN, 1)
//   POINTWISE       MODE (POINTWISE_MODE, 1), MATH_PREC (DATA_TYPE, 1), AXIS (INT64, 1; gen_index only)
//   OPERATION_POINTWISE  PW_DESCRIPTOR, XDESC, BDESC, TDESC, YDESC (BACKEND_DESCRIPTOR, 1 each)
//   REDUCTION       OPERATOR (REDUCTION_OPERATOR_TYPE, 1), COMP_TYPE (DATA_TYPE, 1)
//   OPERATION_REDUCTION  XDESC, YDESC, DESC (BACKEND_DESCRIPTOR, 1 each)
//   MATMUL          COMP_TYPE (DATA_TYPE, 1);  OPERATION_MATMUL  ADESC, BDESC, CDESC, DESC (BACKEND_DESCRIPTOR, 1)
//   OPERATION_RESHAPE    XDESC, YDESC (BACKEND_DESCRIPTOR, 1 each)
//   OPERATIONGRAPH  HANDLE (HANDLE, 1), OPS (BACKEND_DESCRIPTOR, n)
//   ENGINEHEUR      OPERATION_GRAPH (BACKEND_DESCRIPTOR, 1), MODE (HEUR_MODE, 1); RESULTS read as
//                   (BACKEND_DESCRIPTOR, n) into engine-config descriptors the caller created
//   EXECUTION_PLAN  HANDLE (HANDLE, 1), ENGINE_CONFIG (BACKEND_DESCRIPTOR, 1); WORKSPACE_SIZE read as (INT64, 1)
//   VARIANT_PACK    UNIQUE_IDS (INT64, n), DATA_POINTERS (VOID_PTR, n), WORKSPACE (VOID_PTR, 1) (attention_cudnn.cu)
// Every status is checked (CUDNN_CHECK, src/core/cuda_check.h), so a wrong one fails naming the attribute.
//
// Checked without a GPU (tests/cuda/test_cuda_cudnn_graphs.cpp, cuDNN's deviceless planning for an H200 and
// an A100 described in JSON, cudnn_attention_deviceless_check): every descriptor and attribute is accepted,
// cuDNN's flash-attention engines offer themselves for both graphs at every head size the rules allow (and
// for none the rules refuse), and their kernels compile. What only a GPU can verify (nothing here has run on
// one yet): loading and running those kernels, that the results meet the bf16 bounds of
// tests/cuda/test_cuda_attention.cpp, the workspace the plans take on the real GPU and cuDNN, the speed.
#include "kernels/cuda/attention_cudnn_graph.cuh"

#ifdef GPT_WITH_CUDNN
#include <algorithm>
#include <string>
#include <vector>

#include "kernels/cuda/attention_cudnn_check.h"

namespace gpt::cuda {
namespace cudnn_sdpa {
namespace {


// Whom plans are built for: the GPU of a handle, or (deviceless, cuDNN 9.8 and newer) the device a
// CUDNN_BACKEND_DEVICEPROP_DESCRIPTOR describes (cudnn_attention_deviceless_check).
struct Target {
  cudnnHandle_t handle = nullptr;
  cudnnBackendDescriptor_t device = nullptr;
};

// cuDNN's last message, on one line.
std::string last_cudnn_message() {
  char msg[1024] = {0};
  cudnnGetLastErrorString(msg, sizeof msg);
  std::string m(msg);
  for (char& c : m)
    if (c == '\n') c = ' ';
  return m;
}

// Builds one operation graph: tensors and operations, then the plan.
class Graph {
 public:
  explicit Graph(Target target) : target_(target) {}

  // A tensor of dims/strides `v`; uid kVirtual means a fresh virtual (intermediate) tensor.
  cudnnBackendDescriptor_t tensor(cudnnDataType_t type, const SdpaView& v, int64_t uid, bool by_value = false) {
    const bool is_virtual = uid == kVirtual;
    if (is_virtual) uid = next_virtual_++;
    Desc& t = make(CUDNN_BACKEND_TENSOR_DESCRIPTOR);
    SET_ATTR(t.get(), CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &type);
    SET_ATTR(t.get(), CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, 4, v.dim);
    SET_ATTR(t.get(), CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, 4, v.stride);
    SET_ATTR(t.get(), CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &uid);
    SET_ATTR(t.get(), CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, &kAlignment);
    SET_ATTR(t.get(), CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN, 1, &is_virtual);
    SET_ATTR(t.get(), CUDNN_ATTR_TENSOR_IS_BY_VALUE, CUDNN_TYPE_BOOLEAN, 1, &by_value);
    finalize(t.get());
    return t.get();
  }
  cudnnBackendDescriptor_t virt(cudnnDataType_t type, const SdpaView& v) { return tensor(type, v, kVirtual); }
  // An fp32 scalar passed by value at execution (its variant-pack pointer is a host float).
  cudnnBackendDescriptor_t scalar(int64_t uid) {
    const SdpaView one = {{1, 1, 1, 1}, {1, 1, 1, 1}};
    return tensor(CUDNN_DATA_FLOAT, one, uid, true);
  }

  // y = op(x [, b [, t]]); axis only for gen_index.
  void pointwise(cudnnPointwiseMode_t mode, cudnnDataType_t math, cudnnBackendDescriptor_t x,
                 cudnnBackendDescriptor_t b, cudnnBackendDescriptor_t t, cudnnBackendDescriptor_t y,
                 int64_t axis = -1) {
    Desc& pw = make(CUDNN_BACKEND_POINTWISE_DESCRIPTOR);
    SET_ATTR(pw.get(), CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, 1, &mode);
    SET_ATTR(pw.get(), CUDNN_ATTR_POINTWISE_MATH_PREC, CUDNN_TYPE_DATA_TYPE, 1, &math);
    if (axis >= 0) SET_ATTR(pw.get(), CUDNN_ATTR_POINTWISE_AXIS, CUDNN_TYPE_INT64, 1, &axis);
    finalize(pw.get());
    const cudnnBackendDescriptor_t pwd = pw.get();
    Desc& op = make(CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR);
    SET_ATTR(op.get(), CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &pwd);
    SET_ATTR(op.get(), CUDNN_ATTR_OPERATION_POINTWISE_XDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &x);
    if (b) SET_ATTR(op.get(), CUDNN_ATTR_OPERATION_POINTWISE_BDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &b);
    if (t) SET_ATTR(op.get(), CUDNN_ATTR_OPERATION_POINTWISE_TDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &t);
    SET_ATTR(op.get(), CUDNN_ATTR_OPERATION_POINTWISE_YDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &y);
    finalize(op.get());
    ops_.push_back(op.get());
  }
  // The fp32 result of a pointwise op on `x`'s shape (or `v`'s).
  cudnnBackendDescriptor_t unary(cudnnPointwiseMode_t mode, cudnnBackendDescriptor_t x, const SdpaView& v) {
    cudnnBackendDescriptor_t y = virt(CUDNN_DATA_FLOAT, v);
    pointwise(mode, CUDNN_DATA_FLOAT, x, nullptr, nullptr, y);
    return y;
  }
  cudnnBackendDescriptor_t binary(cudnnPointwiseMode_t mode, cudnnBackendDescriptor_t x, cudnnBackendDescriptor_t b,
                                  const SdpaView& v) {
    cudnnBackendDescriptor_t y = virt(CUDNN_DATA_FLOAT, v);
    pointwise(mode, CUDNN_DATA_FLOAT, x, b, nullptr, y);
    return y;
  }

  // y (B, NH, T, 1) = reduce(x) over the last axis, fp32.
  void reduction(cudnnReduceTensorOp_t op_kind, cudnnBackendDescriptor_t x, cudnnBackendDescriptor_t y) {
    const cudnnDataType_t comp = CUDNN_DATA_FLOAT;
    Desc& red = make(CUDNN_BACKEND_REDUCTION_DESCRIPTOR);
    SET_ATTR(red.get(), CUDNN_ATTR_REDUCTION_OPERATOR, CUDNN_TYPE_REDUCTION_OPERATOR_TYPE, 1, &op_kind);
    SET_ATTR(red.get(), CUDNN_ATTR_REDUCTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &comp);
    finalize(red.get());
    const cudnnBackendDescriptor_t rd = red.get();
    Desc& op = make(CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR);
    SET_ATTR(op.get(), CUDNN_ATTR_OPERATION_REDUCTION_XDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &x);
    SET_ATTR(op.get(), CUDNN_ATTR_OPERATION_REDUCTION_YDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &y);
    SET_ATTR(op.get(), CUDNN_ATTR_OPERATION_REDUCTION_DESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &rd);
    finalize(op.get());
    ops_.push_back(op.get());
  }

  // c = a @ b over the last two axes (batched over the first two), fp32 accumulation.
  void matmul(cudnnBackendDescriptor_t a, cudnnBackendDescriptor_t b, cudnnBackendDescriptor_t c) {
    const cudnnDataType_t comp = CUDNN_DATA_FLOAT;
    Desc& mm = make(CUDNN_BACKEND_MATMUL_DESCRIPTOR);
    SET_ATTR(mm.get(), CUDNN_ATTR_MATMUL_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &comp);
    finalize(mm.get());
    const cudnnBackendDescriptor_t mmd = mm.get();
    Desc& op = make(CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR);
    SET_ATTR(op.get(), CUDNN_ATTR_OPERATION_MATMUL_ADESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &a);
    SET_ATTR(op.get(), CUDNN_ATTR_OPERATION_MATMUL_BDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &b);
    SET_ATTR(op.get(), CUDNN_ATTR_OPERATION_MATMUL_CDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &c);
    SET_ATTR(op.get(), CUDNN_ATTR_OPERATION_MATMUL_DESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &mmd);
    finalize(op.get());
    ops_.push_back(op.get());
  }

  // y = x seen through y's dims and strides (a transpose here).
  void reshape(cudnnBackendDescriptor_t x, cudnnBackendDescriptor_t y) {
    Desc& op = make(CUDNN_BACKEND_OPERATION_RESHAPE_DESCRIPTOR);
    SET_ATTR(op.get(), CUDNN_ATTR_OPERATION_RESHAPE_XDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &x);
    SET_ATTR(op.get(), CUDNN_ATTR_OPERATION_RESHAPE_YDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &y);
#if CUDNN_VERSION >= 92200
    // cuDNN 9.22 added a "logical" reshape mode; ours are views (a transpose by strides, with a dtype change),
    // which NVIDIA's frontend states explicitly from 9.22 on rather than rely on the default.
    const cudnnBackendReshapeMode_t mode = CUDNN_RESHAPE_VIEW_ONLY;
    SET_ATTR(op.get(), CUDNN_ATTR_OPERATION_RESHAPE_MODE, CUDNN_TYPE_RESHAPE_MODE, 1, &mode);
#endif
    finalize(op.get());
    ops_.push_back(op.get());
  }

  // keep ? x : -inf, keep = (row index >= column index) over the (T, T) scores x of view v.
  cudnnBackendDescriptor_t causal_mask(cudnnBackendDescriptor_t x, cudnnBackendDescriptor_t neg_inf,
                                       const SdpaView& v) {
    cudnnBackendDescriptor_t row = virt(CUDNN_DATA_INT32, v), col = virt(CUDNN_DATA_INT32, v);
    pointwise(CUDNN_POINTWISE_GEN_INDEX, CUDNN_DATA_FLOAT, x, nullptr, nullptr, row, 2);
    pointwise(CUDNN_POINTWISE_GEN_INDEX, CUDNN_DATA_FLOAT, x, nullptr, nullptr, col, 3);
    cudnnBackendDescriptor_t keep = virt(CUDNN_DATA_BOOLEAN, v);
    pointwise(CUDNN_POINTWISE_CMP_GE, CUDNN_DATA_BOOLEAN, row, col, nullptr, keep);
    cudnnBackendDescriptor_t y = virt(CUDNN_DATA_FLOAT, v);
    pointwise(CUDNN_POINTWISE_BINARY_SELECT, CUDNN_DATA_FLOAT, x, neg_inf, keep, y);
    return y;
  }

  // The operation graph, finalized once.
  cudnnBackendDescriptor_t op_graph() {
    if (graph_) return graph_;
    Desc& g = make(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR);
    if (target_.handle) SET_ATTR(g.get(), CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1, &target_.handle);
    SET_ATTR(g.get(), CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, (int64_t)ops_.size(), ops_.data());
    finalize(g.get());
    return graph_ = g.get();
  }

  // The engine configs cuDNN's heuristics in `mode` offer for the graph, best first (empty when none; the
  // heuristics' own finalize status in *status).
  std::vector<Desc> engine_configs(cudnnBackendHeurMode_t mode, cudnnStatus_t* status) {
    const cudnnBackendDescriptor_t gd = op_graph();
    Desc heur(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR);
    SET_ATTR(heur.get(), CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &gd);
    SET_ATTR(heur.get(), CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &mode);
    if (target_.device)
      SET_ATTR(heur.get(), CUDNN_ATTR_ENGINEHEUR_DEVICEPROP, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &target_.device);
    std::vector<Desc> configs;
    *status = cudnnBackendFinalize(heur.get());
    if (*status != CUDNN_STATUS_SUCCESS) return configs;
    int64_t count = 0;
    CUDNN_CHECK(cudnnBackendGetAttribute(heur.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 0,
                                         &count, nullptr));
    std::vector<cudnnBackendDescriptor_t> raw;
    for (int64_t i = 0; i < count; i++) {
      configs.emplace_back(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR);
      raw.push_back(configs.back().get());
    }
    int64_t got = 0;
    if (count > 0)
      CUDNN_CHECK(cudnnBackendGetAttribute(heur.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR,
                                           count, &got, raw.data()));
    while ((int64_t)configs.size() > std::max<int64_t>(got, 0)) configs.pop_back();
    return configs;
  }

  // The execution plan of one engine config; *status says whether it finalized (the engine takes the graph
  // and its kernels compiled and loaded).
  Desc plan_for(cudnnBackendDescriptor_t config, cudnnStatus_t* status) {
    Desc plan(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR);
    if (target_.handle)
      SET_ATTR(plan.get(), CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, 1, &target_.handle);
    if (target_.device)
      SET_ATTR(plan.get(), CUDNN_ATTR_EXECUTION_PLAN_DEVICEPROP, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &target_.device);
    SET_ATTR(plan.get(), CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &config);
    *status = cudnnBackendFinalize(plan.get());
    return plan;
  }

  // The first engine config (heuristics mode A, then fallback) whose execution plan finalizes, with its
  // workspace size and every descriptor it was built from. `what` names the graph in errors.
  Plan build(const char* what) {
    cudnnStatus_t heur_status = CUDNN_STATUS_NOT_SUPPORTED;  // the last heuristics query's
    cudnnStatus_t first_fail = CUDNN_STATUS_SUCCESS;          // the first plan that did not finalize, and why
    std::string first_msg;
    int64_t tried = 0;
    for (cudnnBackendHeurMode_t mode : {CUDNN_HEUR_MODE_A, CUDNN_HEUR_MODE_FALLBACK}) {
      std::vector<Desc> configs = engine_configs(mode, &heur_status);
      for (Desc& config : configs) {
        tried++;
        cudnnStatus_t st = CUDNN_STATUS_SUCCESS;
        Desc plan = plan_for(config.get(), &st);
        if (st != CUDNN_STATUS_SUCCESS) {  // this engine does not take the graph: try the next
          if (first_fail == CUDNN_STATUS_SUCCESS) first_fail = st, first_msg = last_cudnn_message();
          continue;
        }
        Plan p;
        int64_t n = 0;
        CUDNN_CHECK(cudnnBackendGetAttribute(plan.get(), CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, CUDNN_TYPE_INT64,
                                             1, &n, &p.workspace));
        GPT_CHECK(p.workspace >= 0, "cuDNN ", what, " attention: negative workspace size ", p.workspace);
        p.plan = plan.get();
        p.keep = std::move(keep_);
        p.keep.push_back(std::move(config));
        p.keep.push_back(std::move(plan));
        return p;
      }
    }
    // The first refusal says the most (a later engine, or the fallback heuristics' query, often only "not
    // supported"); the versions show a cuDNN built for another CUDA than this binary.
    const cudnnStatus_t st = tried > 0 ? first_fail : heur_status;
    const std::string msg = tried > 0 ? first_msg : last_cudnn_message();
    fail("cuDNN has no engine for the ", what, " attention graph on this GPU (", tried, " engine configs tried; ",
         tried > 0 ? "the first refused with " : "heuristics status ", cudnnGetErrorString(st), msg.empty() ? "" : ": ",
         msg, "; cuDNN ", cudnnGetVersion(), " built for CUDA runtime ", cudnnGetCudartVersion(), ", this binary's ",
         CUDART_VERSION, ")");
  }

 private:
  Desc& make(cudnnBackendDescriptorType_t type) {
    keep_.emplace_back(type);
    return keep_.back();
  }

  Target target_;
  std::deque<Desc> keep_;  // a deque: references returned by make() stay valid
  std::vector<cudnnBackendDescriptor_t> ops_;
  cudnnBackendDescriptor_t graph_ = nullptr;  // the finalized operation graph (in keep_)
  int64_t next_virtual_ = kVirtual;
};

// The (T, T) scores of every head, packed, and their transpose; the (T, 1) row reductions; the heads packed.
SdpaView scores_view(int64_t B, int64_t NH, int64_t T) { return {{B, NH, T, T}, {NH * T * T, T * T, T, 1}}; }
SdpaView scores_t_view(int64_t B, int64_t NH, int64_t T) { return {{B, NH, T, T}, {NH * T * T, T * T, 1, T}}; }
SdpaView rows_view(int64_t B, int64_t NH, int64_t T) { return {{B, NH, T, 1}, {NH * T, T, 1, 1}}; }
SdpaView heads_view(int64_t B, int64_t NH, int64_t T, int64_t hs) {
  return {{B, NH, T, hs}, {NH * T * hs, T * hs, hs, 1}};
}
// k as (B, NH, T, hs) from its transposed view: the same memory, dims and strides of the last two swapped.
SdpaView untransposed(const SdpaView& t) {
  return {{t.dim[0], t.dim[1], t.dim[3], t.dim[2]}, {t.stride[0], t.stride[1], t.stride[3], t.stride[2]}};
}

// The operation graphs (top of file) of forward and backward, into g.
void forward_graph(Graph& g, const SdpaLayout& l) {
  const int64_t B = l.q.dim[0], NH = l.q.dim[1], T = l.q.dim[2];
  const SdpaView sc = scores_view(B, NH, T), rows = rows_view(B, NH, T);
  auto q = g.tensor(CUDNN_DATA_BFLOAT16, l.q, kQ);
  auto kt = g.tensor(CUDNN_DATA_BFLOAT16, l.kt, kK);
  auto v = g.tensor(CUDNN_DATA_BFLOAT16, l.v, kV);
  auto o = g.tensor(CUDNN_DATA_BFLOAT16, l.o, kO);
  auto stats = g.tensor(CUDNN_DATA_FLOAT, l.stats, kStats);
  auto scale = g.scalar(kScale), neg_inf = g.scalar(kNegInf);

  auto s = g.virt(CUDNN_DATA_FLOAT, sc);
  g.matmul(q, kt, s);
  s = g.binary(CUDNN_POINTWISE_MUL, s, scale, sc);
  s = g.causal_mask(s, neg_inf, sc);
  auto m = g.virt(CUDNN_DATA_FLOAT, rows);
  g.reduction(CUDNN_REDUCE_TENSOR_MAX, s, m);
  auto e = g.unary(CUDNN_POINTWISE_EXP, g.binary(CUDNN_POINTWISE_SUB, s, m, sc), sc);
  auto z = g.virt(CUDNN_DATA_FLOAT, rows);
  g.reduction(CUDNN_REDUCE_TENSOR_ADD, e, z);
  g.pointwise(CUDNN_POINTWISE_ADD, CUDNN_DATA_FLOAT, m, g.unary(CUDNN_POINTWISE_LOG, z, rows), nullptr, stats);
  auto p = g.virt(CUDNN_DATA_BFLOAT16, sc);  // the probabilities enter the second product as bf16
  g.pointwise(CUDNN_POINTWISE_DIV, CUDNN_DATA_FLOAT, e, z, nullptr, p);
  g.matmul(p, v, o);
}

void backward_graph(Graph& g, const SdpaLayout& l) {
  const int64_t B = l.q.dim[0], NH = l.q.dim[1], T = l.q.dim[2], hs = l.q.dim[3];
  const SdpaView sc = scores_view(B, NH, T), sct = scores_t_view(B, NH, T), rows = rows_view(B, NH, T);
  const SdpaView heads = heads_view(B, NH, T, hs);
  auto q = g.tensor(CUDNN_DATA_BFLOAT16, l.q, kQ);
  auto kt = g.tensor(CUDNN_DATA_BFLOAT16, l.kt, kK);
  auto vt = g.tensor(CUDNN_DATA_BFLOAT16, l.vt, kV);
  auto o = g.tensor(CUDNN_DATA_BFLOAT16, l.o, kO);
  auto dout = g.tensor(CUDNN_DATA_BFLOAT16, l.o, kDO);
  auto stats = g.tensor(CUDNN_DATA_FLOAT, l.stats, kStats);
  auto dq = g.tensor(CUDNN_DATA_BFLOAT16, l.q, kDQ);
  auto dk = g.tensor(CUDNN_DATA_BFLOAT16, l.k, kDK);
  auto dv = g.tensor(CUDNN_DATA_BFLOAT16, l.v, kDV);
  auto dsum = g.tensor(CUDNN_DATA_FLOAT, rows, kDsum);
  auto dq_accum = g.tensor(CUDNN_DATA_FLOAT, heads, kDqAccum);
  auto scale = g.scalar(kScale), neg_inf = g.scalar(kNegInf), one = g.scalar(kOne);

  // Dsum = rowsum(dout * out), the softmax-gradient row terms
  auto r = g.virt(CUDNN_DATA_FLOAT, rows);
  g.reduction(CUDNN_REDUCE_TENSOR_ADD, g.binary(CUDNN_POINTWISE_MUL, dout, o, heads), r);
  g.pointwise(CUDNN_POINTWISE_MUL, CUDNN_DATA_FLOAT, r, one, nullptr, dsum);
  // P = exp(causal(s q kt - stats))
  auto s = g.virt(CUDNN_DATA_FLOAT, sc);
  g.matmul(q, kt, s);
  s = g.binary(CUDNN_POINTWISE_MUL, s, scale, sc);
  s = g.binary(CUDNN_POINTWISE_SUB, s, stats, sc);
  s = g.causal_mask(s, neg_inf, sc);
  auto p = g.unary(CUDNN_POINTWISE_EXP, s, sc);
  // dv = P^T dout
  auto pt = g.virt(CUDNN_DATA_BFLOAT16, sct);
  g.reshape(p, pt);
  g.matmul(pt, dout, dv);
  // dS = s P (dout vt - Dsum)
  auto dp = g.virt(CUDNN_DATA_FLOAT, sc);
  g.matmul(dout, vt, dp);
  auto ds = g.binary(CUDNN_POINTWISE_MUL, g.binary(CUDNN_POINTWISE_SUB, dp, dsum, sc), p, sc);
  ds = g.binary(CUDNN_POINTWISE_MUL, ds, scale, sc);
  // dk = dS^T q
  auto dst = g.virt(CUDNN_DATA_BFLOAT16, sct);
  g.reshape(ds, dst);
  g.matmul(dst, q, dk);
  // dq = dS k, accumulated in fp32
  auto k = g.virt(CUDNN_DATA_FLOAT, untransposed(l.kt));
  g.reshape(kt, k);
  g.matmul(ds, k, dq_accum);
  g.pointwise(CUDNN_POINTWISE_IDENTITY, CUDNN_DATA_FLOAT, dq_accum, nullptr, nullptr, dq);
}


// What cuDNN makes of a graph: the heuristics' offers and the first offer's workspace and plan.
CudnnGraphCheck check_graph(Graph& g) {
  CudnnGraphCheck r;
  cudnnStatus_t st = CUDNN_STATUS_NOT_SUPPORTED;
  for (cudnnBackendHeurMode_t mode : {CUDNN_HEUR_MODE_A, CUDNN_HEUR_MODE_FALLBACK}) {
    std::vector<Desc> configs = g.engine_configs(mode, &st);
    if (configs.empty()) continue;
    r.configs = (long long)configs.size();
    int64_t ws = -1, n = 0;
    CUDNN_CHECK(cudnnBackendGetAttribute(configs[0].get(), CUDNN_ATTR_ENGINECFG_WORKSPACE_SIZE, CUDNN_TYPE_INT64, 1,
                                         &n, &ws));
    r.workspace = (long long)ws;
    Desc plan = g.plan_for(configs[0].get(), &st);
    r.plan_status = (int)st;
    r.plan_status_name = cudnnGetErrorString(st);
    r.message = last_cudnn_message();
    return r;
  }
  r.message = last_cudnn_message();
  return r;
}

}  // namespace

Plan build_plan(cudnnHandle_t handle, bool backward, const SdpaLayout& l) {
  Graph g(Target{handle, nullptr});
  if (backward) {
    backward_graph(g, l);
    return g.build("backward");
  }
  forward_graph(g, l);
  return g.build("forward");
}

}  // namespace cudnn_sdpa

using namespace cudnn_sdpa;

CudnnDevicelessCheck cudnn_attention_deviceless_check(int B, int T, int C, int NH, const std::string& device_json) {
  const int hs = head_size(C, NH);
  GPT_CHECK(B >= 1 && T >= 2, "cuDNN deviceless check: needs B >= 1 and T >= 2 (T = 1 has no plans), got B=", B,
            " T=", T);
  Desc device(CUDNN_BACKEND_DEVICEPROP_DESCRIPTOR);
  SET_ATTR(device.get(), CUDNN_ATTR_DEVICEPROP_JSON_REPRESENTATION, CUDNN_TYPE_CHAR, (int64_t)device_json.size(),
           device_json.data());
  finalize(device.get());
  const SdpaLayout l = packed_sdpa_layout(B, T, NH, hs);
  CudnnDevicelessCheck r;
  Graph fwd(Target{nullptr, device.get()}), bwd(Target{nullptr, device.get()});
  forward_graph(fwd, l);
  backward_graph(bwd, l);
  r.forward = check_graph(fwd);
  r.backward = check_graph(bwd);
  return r;
}

long long cudnn_loaded_version() { return static_cast<long long>(cudnnGetVersion()); }

}  // namespace gpt::cuda
#endif  // GPT_WITH_CUDNN
