// Matrix products on the GPU through cuBLASLt (twin of kernels/cpu/matmul.cpp), plus the bias-gradient
// reduction. bf16 operands, fp32 compute (CUBLAS_COMPUTE_32F, fp32 alpha/beta); outputs bf16 for
// activations and fp32 for weight gradients (bf16 A/B with fp32 C/D is one of cuBLASLt's listed type
// combinations for CUBLAS_COMPUTE_32F).
//
// Plans: the descriptors and the heuristic's algorithm depend only on a product's shape (gemm_key.h), so
// each shape is planned once and cached in the BlasContext; a call sets only its pointers.
//
// Row-major to column-major. cuBLASLt is column-major: a row-major R x S matrix with row stride ld is, in
// the same memory, the column-major S x R matrix (its transpose) with leading dimension ld. So the
// row-major product C = op(A) @ op(B) (M x N) is computed as the column-major product
//   C^T (N x M) = op(B)^T (N x K) @ op(A)^T (K x M):
// cuBLASLt's first operand is our B and its second is our A, each keeping its own transpose flag:
//   - B not transposed: stored K x N row-major = column-major N x K = op(B)^T already: OP_N, layout (N, K).
//     B transposed: stored N x K row-major = column-major K x N = op(B): OP_T, layout (K, N).
//   - A not transposed: stored M x K row-major = column-major K x M = op(A)^T: OP_N, layout (K, M).
//     A transposed: stored K x M row-major = column-major M x K = op(A): OP_T, layout (M, K).
//   - D = C^T: column-major N x M with leading dimension ldc; cuBLASLt's m = N, n = M, k = K.
// The bias epilogue adds a vector along D's rows (length m = N), i.e. bias[n] to every row of our C.
//
// The three products of a linear layer, with out = inp @ w^T (N rows):
//   forward  out  (N x OC) = inp (N x C) @ w^T        A = inp,              B = w (transposed)
//   backward dinp (N x C)  = dout (N x OC) @ w        A = dout,             B = w
//   backward dw   (OC x C) += dout^T @ inp (N x C)    A = dout (transposed), B = inp, fp32 C, beta 1
#include "kernels/cuda/ops.cuh"

namespace gpt::cuda {
namespace {

constexpr int kChunks = kBiasGradChunks;  // row chunks of the bias-gradient reduction (kernels/sizes.h)
constexpr int kColTile = 32;  // columns per block
constexpr int kRowThreads = 8;

// The preference of one heuristic query, destroyed on every path (an error included).
struct LtPref {
  cublasLtMatmulPreference_t pref = nullptr;
  ~LtPref() {
    if (pref) cublasLtMatmulPreferenceDestroy(pref);
  }
};

// What g's plan depends on (gemm_key.h). Strides are ignored by a single product, so they are not keyed.
GemmKey key_of(const GemmSpec& g) {
  GemmKey k;
  k.M = g.M, k.N = g.N, k.K = g.K;
  k.lda = g.lda, k.ldb = g.ldb, k.ldc = g.ldc;
  k.trans_a = g.trans_a, k.trans_b = g.trans_b;
  k.batch = g.batch;
  if (g.batch > 1) k.stride_a = g.stride_a, k.stride_b = g.stride_b, k.stride_c = g.stride_c;
  k.c_f32 = g.c_f32;
  k.bias = g.bias != nullptr;
  k.beta_zero = g.beta == 0.0f;
  const size_t c_bytes = g.c_f32 ? sizeof(float) : sizeof(bf16);
  k.align_a = operand_alignment(reinterpret_cast<uintptr_t>(g.A), g.stride_a, sizeof(bf16), g.batch);
  k.align_b = operand_alignment(reinterpret_cast<uintptr_t>(g.B), g.stride_b, sizeof(bf16), g.batch);
  k.align_c = operand_alignment(reinterpret_cast<uintptr_t>(g.C), g.stride_c, c_bytes, g.batch);
  k.align_bias = operand_alignment(reinterpret_cast<uintptr_t>(g.bias), 0, sizeof(bf16), 1);
  k.gelu = g.gelu_aux != nullptr;
  k.align_aux = operand_alignment(reinterpret_cast<uintptr_t>(g.gelu_aux), 0, sizeof(bf16), 1);
  return k;
}

void make_layout(cublasLtMatrixLayout_t* layout, cudaDataType_t type, uint64_t rows, uint64_t cols, int64_t ld,
                 int batch, long long stride) {
  CUBLAS_CHECK(cublasLtMatrixLayoutCreate(layout, type, rows, cols, ld));
  if (batch > 1) {
    const int32_t count = batch;
    const int64_t offset = stride;
    CUBLAS_CHECK(
        cublasLtMatrixLayoutSetAttribute(*layout, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof(count)));
    CUBLAS_CHECK(cublasLtMatrixLayoutSetAttribute(*layout, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &offset,
                                                  sizeof(offset)));
  }
}

void set_pref_alignment(cublasLtMatmulPreference_t pref, cublasLtMatmulPreferenceAttributes_t attr,
                        uint32_t a) {
  CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, attr, &a, sizeof(a)));
}

// Stage 1 of dbias: partials (kChunks, OC), each the sum of dout over one chunk's rows.
__global__ void bias_partials_kernel(float* partials, const bf16* dout, int N, int OC) {
  __shared__ float s[kRowThreads][kColTile];
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int c = blockIdx.x * kColTile + tx;
  const int chunk = blockIdx.y;
  float sum = 0.0f;
  if (c < OC) {
    for (int r = chunk * kRowThreads + ty; r < N; r += kChunks * kRowThreads)
      sum += to_f32(dout[static_cast<size_t>(r) * OC + c]);
  }
  s[ty][tx] = sum;
  __syncthreads();
  if (ty == 0 && c < OC) {
    float t = 0.0f;
    for (int k = 0; k < kRowThreads; k++) t += s[k][tx];
    partials[static_cast<size_t>(chunk) * OC + c] = t;
  }
}

// Stage 2: dbias[c] += sum of the chunks' partials, in chunk order.
__global__ void bias_reduce_kernel(float* dbias, const float* partials, int OC) {
  const int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= OC) return;
  float t = 0.0f;
  for (int k = 0; k < kChunks; k++) t += partials[static_cast<size_t>(k) * OC + c];
  dbias[c] += t;
}

}  // namespace

GemmPlan::GemmPlan(GemmPlan&& o) noexcept
    : op(o.op), a(o.a), b(o.b), d(o.d), algo(o.algo), supported(o.supported) {
  o.op = nullptr;
  o.a = o.b = o.d = nullptr;
}

GemmPlan::~GemmPlan() {  // no throwing in a destructor: statuses are ignored
  if (d) cublasLtMatrixLayoutDestroy(d);
  if (b) cublasLtMatrixLayoutDestroy(b);
  if (a) cublasLtMatrixLayoutDestroy(a);
  if (op) cublasLtMatmulDescDestroy(op);
}

namespace {

// The descriptors of g's shape and the algorithm the heuristic picks for them (under the workspace limit
// and the operands' real alignments, both in the key).
GemmPlan make_plan(const BlasContext& ctx, const GemmSpec& g, const GemmKey& k) {
  GemmPlan p;
  const cudaDataType_t c_type = g.c_f32 ? CUDA_R_32F : CUDA_R_16BF;
  CUBLAS_CHECK(cublasLtMatmulDescCreate(&p.op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  const cublasOperation_t op1 = g.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;  // cuBLASLt "A" is our B
  const cublasOperation_t op2 = g.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;  // cuBLASLt "B" is our A
  CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_TRANSA, &op1, sizeof(op1)));
  CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_TRANSB, &op2, sizeof(op2)));
  if (g.bias) {
    // bias (and aux) types default to D's type (bf16); the aux matrix has D's shape, leading dim ldc
    const cublasLtEpilogue_t epi = g.gelu_aux ? CUBLASLT_EPILOGUE_GELU_AUX_BIAS : CUBLASLT_EPILOGUE_BIAS;
    CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof(epi)));
    if (g.gelu_aux) {
      const int64_t aux_ld = g.ldc;
      CUBLAS_CHECK(
          cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &aux_ld, sizeof(aux_ld)));
      // The heuristic reads the pointer's value for its alignment (as for the bias): set it before asking.
      CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &g.gelu_aux,
                                                  sizeof(g.gelu_aux)));
    }
    CUBLAS_CHECK(
        cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &g.bias, sizeof(g.bias)));
  }
  if (g.trans_b)
    make_layout(&p.a, CUDA_R_16BF, g.K, g.N, g.ldb, g.batch, g.stride_b);
  else
    make_layout(&p.a, CUDA_R_16BF, g.N, g.K, g.ldb, g.batch, g.stride_b);
  if (g.trans_a)
    make_layout(&p.b, CUDA_R_16BF, g.M, g.K, g.lda, g.batch, g.stride_a);
  else
    make_layout(&p.b, CUDA_R_16BF, g.K, g.M, g.lda, g.batch, g.stride_a);
  make_layout(&p.d, c_type, g.N, g.M, g.ldc, g.batch, g.stride_c);

  LtPref pref;
  CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref.pref));
  const uint64_t ws = ctx.workspace_bytes;
  CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref.pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws,
                                                    sizeof(ws)));
  // The default assumes 256-byte aligned operands; say what ours really are.
  set_pref_alignment(pref.pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, k.align_b);
  set_pref_alignment(pref.pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, k.align_a);
  set_pref_alignment(pref.pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, k.align_c);
  set_pref_alignment(pref.pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, k.align_c);

  cublasLtMatmulHeuristicResult_t heur{};
  int found = 0;
  // "No algorithm" comes back either as found == 0 or as CUBLAS_STATUS_NOT_SUPPORTED: name the product.
  const cublasStatus_t st =
      cublasLtMatmulAlgoGetHeuristic(ctx.handle, p.op, p.a, p.b, p.d, p.d, pref.pref, 1, &heur, &found);
  if (g.gelu_aux && !(st == CUBLAS_STATUS_SUCCESS && found > 0)) {  // optional fusion: the caller falls back
    p.supported = false;
    return p;
  }
  GPT_CHECK(st == CUBLAS_STATUS_SUCCESS && found > 0, "cuda gemm: cuBLASLt has no algorithm (",
            cublasLtGetStatusName(st), ") for M=", g.M, " N=", g.N, " K=", g.K, " lda=", g.lda, " ldb=", g.ldb,
            " ldc=", g.ldc, " batch=", g.batch, " trans_a=", g.trans_a, " trans_b=", g.trans_b,
            " fp32_out=", g.c_f32, " bias=", g.bias != nullptr);
  p.algo = heur.algo;
  return p;
}

}  // namespace

// Plans a shape on its first call; afterwards only the per-call pointers change. Calls come from one host
// thread (the backend's), so the cache needs no lock. The descriptors are read when the product is
// enqueued, so updating the bias pointer for the next call cannot affect a product still in flight.
bool try_gemm(const BlasContext& ctx, const GemmSpec& g, cudaStream_t stream) {
  GPT_CHECK(g.M > 0 && g.N > 0 && g.K > 0 && g.batch > 0, "cuda gemm: empty product M=", g.M, " N=", g.N,
            " K=", g.K, " batch=", g.batch);
  GPT_CHECK(!g.bias || (!g.c_f32 && g.batch == 1), "cuda gemm: a bias needs a bf16 output and batch 1");
  GPT_CHECK(!g.gelu_aux || g.bias, "cuda gemm: the GELU epilogue is only planned with a bias");
  const GemmKey key = key_of(g);
  auto it = ctx.plans.find(key);
  if (it == ctx.plans.end()) it = ctx.plans.emplace(key, make_plan(ctx, g, key)).first;
  const GemmPlan& p = it->second;
  if (!p.supported) return false;
  if (g.bias)
    CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &g.bias, sizeof(g.bias)));
  if (g.gelu_aux)
    CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &g.gelu_aux,
                                                sizeof(g.gelu_aux)));
  // C and D are the same buffer with the same layout (in place); with beta 0 C is not read.
  CUBLAS_CHECK(cublasLtMatmul(ctx.handle, p.op, &g.alpha, g.B, p.a, g.A, p.b, &g.beta, g.C, p.d, g.C, p.d,
                              &p.algo, ctx.workspace, ctx.workspace_bytes, stream));
  return true;
}

void gemm(const BlasContext& ctx, const GemmSpec& g, cudaStream_t stream) {
  GPT_CHECK(try_gemm(ctx, g, stream), "cuda gemm: no algorithm");  // only optional fusions return false
}

namespace {
// out (N,OC) = inp (N,C) @ w^T (w is (OC,C)) + bias: the product of a linear layer.
GemmSpec linear(bf16* out, const bf16* inp, const bf16* w, const bf16* bias, int N, int C, int OC) {
  GemmSpec g;
  g.M = N, g.N = OC, g.K = C;
  g.A = inp, g.lda = C;
  g.B = w, g.ldb = C, g.trans_b = true;
  g.C = out, g.ldc = OC;
  g.bias = bias;
  return g;
}
}  // namespace

void matmul_forward(bf16* out, const bf16* inp, const bf16* w, const bf16* bias, int N, int C, int OC,
                    const BlasContext& ctx, cudaStream_t stream) {
  if (N == 0) return;
  gemm(ctx, linear(out, inp, w, bias, N, C, OC), stream);
}

void matmul_gelu_forward(bf16* out, bf16* pre, const bf16* inp, const bf16* w, const bf16* bias, int N, int C,
                         int OC, const BlasContext& ctx, cudaStream_t stream) {
  if (N == 0) return;
  GemmSpec g = linear(out, inp, w, bias, N, C, OC);
  g.gelu_aux = pre;
  // The epilogue's aux output wants 16-byte alignment and a leading dimension divisible by 8.
  const bool aux_ok = reinterpret_cast<uintptr_t>(pre) % 16 == 0 && OC % 8 == 0;
  if (bias && aux_ok && try_gemm(ctx, g, stream)) return;
  matmul_forward(pre, inp, w, bias, N, C, OC, ctx, stream);
  gelu_forward(out, pre, static_cast<size_t>(N) * OC, stream);
}

void matmul_backward(bf16* dinp, float* dw, float* dbias, const bf16* dout, const bf16* inp, const bf16* w,
                     int N, int C, int OC, const BlasContext& ctx, void* scratch, cudaStream_t stream) {
  if (N == 0) return;
  if (dinp) {
    GemmSpec g;
    g.M = N, g.N = C, g.K = OC;
    g.A = dout, g.lda = OC;
    g.B = w, g.ldb = C;
    g.C = dinp, g.ldc = C;
    gemm(ctx, g, stream);
  }
  {
    GemmSpec g;
    g.M = OC, g.N = C, g.K = N;
    g.A = dout, g.lda = OC, g.trans_a = true;
    g.B = inp, g.ldb = C;
    g.C = dw, g.ldc = C, g.c_f32 = true;
    g.beta = 1.0f;  // accumulate
    gemm(ctx, g, stream);
  }
  if (dbias) {
    float* partials = static_cast<float*>(scratch);  // (kChunks, OC)
    const dim3 grid(static_cast<unsigned>(ceil_div(OC, kColTile)), kChunks);
    bias_partials_kernel<<<grid, dim3(kColTile, kRowThreads), 0, stream>>>(partials, dout, N, OC);
    CUDA_CHECK_LAUNCH();
    const int threads = 256;
    bias_reduce_kernel<<<static_cast<unsigned>(ceil_div(OC, threads)), threads, 0, stream>>>(dbias, partials,
                                                                                             OC);
    CUDA_CHECK_LAUNCH();
  }
}

}  // namespace gpt::cuda
