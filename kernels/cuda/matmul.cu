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
// Epilogues: BIAS (bias[n] on every row) only when the bias can be read safely, OC % 8 == 0 and a 16-byte
// aligned bias (bias_epilogue_ok): cuBLASLt has no alignment preference for the bias pointer, so an odd one
// could be rejected or misread; otherwise the product runs bare and bias_forward adds the bias (one more
// bf16 rounding, inside the twin tests' bound). GELU_AUX_BIAS for the MLP's first layer (out = gelu(pre),
// aux = pre) and DGELU for the product after it in backward (dpre = gelu'(pre) * (dout @ w), aux = pre), both
// with a plain fallback when cuBLASLt has no algorithm or the aux matrix is not 16-byte aligned with ldc % 8
// == 0. What only a GPU can show: which shapes get the fused epilogues (GemmPlan::supported), and that the
// epilogues' GELU matches the tanh form within the bounds of test_cuda_matmul_gelu.cpp.
//
// bias_forward and bias_backward are also Backend ops of their own (tensor parallelism: a row-parallel product
// adds its bias once, after the reduction of its partial products): the same kernels as the fallback above and as
// matmul_backward's dbias, so a bias on its own gets the same values as inside a matmul.
//
// The three products of a linear layer, with out = inp @ w^T (N rows):
//   forward  out  (N x OC) = inp (N x C) @ w^T        A = inp,              B = w (transposed)
//   backward dinp (N x C)  = dout (N x OC) @ w        A = dout,             B = w
//   backward dw   (OC x C) += dout^T @ inp (N x C)    A = dout (transposed), B = inp, fp32 C, beta 1
#include "kernels/cuda/ops.cuh"

namespace gpt::cuda {
namespace {

constexpr int kChunks = kBiasGradChunks;  // row chunks of the bias-gradient reduction (kernels/sizes.h)
constexpr int kColThreads = 32;               // bias gradient: threads across the columns, kVec columns each
constexpr int kRowThreads = 8;                // threads down one chunk's rows
constexpr int kColTile = kColThreads * kVec;  // columns per block (256)
static_assert(kColThreads * kRowThreads == kColTile, "the final sum takes one column of the tile per thread");

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
  k.dgelu = g.dgelu_aux != nullptr;
  const void* aux = g.gelu_aux ? static_cast<const void*>(g.gelu_aux) : static_cast<const void*>(g.dgelu_aux);
  k.align_aux = operand_alignment(reinterpret_cast<uintptr_t>(aux), 0, sizeof(bf16), 1);
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

// Stage 1 of dbias: partials (kChunks, OC), each the sum of dout over one chunk's rows. Chunk k's rows are
// k kRowThreads + ty + j kChunks kRowThreads (j = 0, 1, ...): thread (tx, ty) sums its kVec columns over its
// rows in row order, then each column adds the kRowThreads sums in ty order. The vector path (dout 16-byte
// aligned, OC % 8 == 0) reads a row's kVec columns in one 16-byte load, the scalar path the same elements
// one by one: the same sums in the same order, so the paths agree bit for bit. Unrolling the row loop keeps
// several loads in flight per thread (the sums still run in row order).
template <bool kVecPath>
__global__ void bias_partials_kernel(float* partials, const bf16* dout, int N, int OC) {
  __shared__ float s[kRowThreads][kColTile];  // per-thread column sums, 8 KB
  const int tx = threadIdx.x, ty = threadIdx.y, chunk = blockIdx.y;
  const int col0 = blockIdx.x * kColTile;
  const int c = col0 + tx * kVec;
  const int n = min(kVec, OC - c);  // this thread's columns inside the row (none when <= 0)
  float sum[kVec] = {};
  if (n > 0) {
    const size_t step = static_cast<size_t>(kChunks) * kRowThreads;
#pragma unroll 4
    for (size_t r = static_cast<size_t>(chunk) * kRowThreads + ty; r < static_cast<size_t>(N); r += step) {
      float x[kVec] = {};
      load_row8<kVecPath>(x, dout + r * OC + c, n);
#pragma unroll
      for (int k = 0; k < kVec; k++) sum[k] += x[k];
    }
  }
#pragma unroll
  for (int k = 0; k < kVec; k++) s[ty][tx * kVec + k] = sum[k];
  __syncthreads();
  const int j = ty * kColThreads + tx;  // one column of the tile per thread, coalesced writes
  if (col0 + j < OC) {
    float t = 0.0f;
    for (int y = 0; y < kRowThreads; y++) t += s[y][j];
    partials[static_cast<size_t>(chunk) * OC + col0 + j] = t;
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

// dbias (OC) += column sums of dout (N,OC), deterministic: per-chunk partials in scratch, then chunk order.
void bias_backward(float* dbias, const bf16* dout, int N, int OC, void* scratch, cudaStream_t stream) {
  if (!dbias || N == 0 || OC == 0) return;
  float* partials = static_cast<float*>(scratch);  // (kChunks, OC)
  const dim3 grid(static_cast<unsigned>(ceil_div(OC, kColTile)), kChunks), block(kColThreads, kRowThreads);
  if (aligned16(dout) && OC % kVec == 0)
    GPT_LAUNCH(bias_partials_kernel<true>, grid, block, 0, stream, partials, dout, N, OC);
  else
    GPT_LAUNCH(bias_partials_kernel<false>, grid, block, 0, stream, partials, dout, N, OC);
  const int threads = 256;
  GPT_LAUNCH(bias_reduce_kernel, static_cast<unsigned>(ceil_div(OC, threads)), threads, 0, stream, dbias, partials,
             OC);
}

// x (N,OC) += bias on every row: a table of one row (add_table_rows, residual.cu).
void bias_forward(bf16* x, const bf16* bias, int N, int OC, cudaStream_t stream) {
  add_table_rows(x, bias, 0, N, 1, OC, stream);
}

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

// g's shape and options, for errors that must say which product failed.
std::string shape_name(const GemmSpec& g) {
  return str("M=", g.M, " N=", g.N, " K=", g.K, " lda=", g.lda, " ldb=", g.ldb, " ldc=", g.ldc, " batch=", g.batch,
             " trans_a=", g.trans_a, " trans_b=", g.trans_b, " fp32_out=", g.c_f32, " bias=", g.bias != nullptr,
             " gelu_aux=", g.gelu_aux != nullptr, " dgelu_aux=", g.dgelu_aux != nullptr);
}

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
  if (g.dgelu_aux) {
    // D = gelu'(aux) * product; aux is the GELU's input in D's type (bf16) and layout (leading dim ldc).
    const cublasLtEpilogue_t epi = CUBLASLT_EPILOGUE_DGELU;
    CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof(epi)));
    const int64_t aux_ld = g.ldc;
    CUBLAS_CHECK(
        cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &aux_ld, sizeof(aux_ld)));
    CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &g.dgelu_aux,
                                                sizeof(g.dgelu_aux)));
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
  // The result's fields hold only when its own state says so.
  const bool ok = st == CUBLAS_STATUS_SUCCESS && found > 0 && heur.state == CUBLAS_STATUS_SUCCESS;
  if ((g.gelu_aux || g.dgelu_aux) && !ok) {  // optional: caller falls back
    p.supported = false;
    return p;
  }
  GPT_CHECK(ok, "cuda gemm: cuBLASLt has no algorithm (",
            cublasLtGetStatusName(st != CUBLAS_STATUS_SUCCESS ? st : heur.state), ") for ", shape_name(g));
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
  GPT_CHECK(!g.dgelu_aux || (!g.bias && !g.c_f32 && g.batch == 1),
            "cuda gemm: the DGELU epilogue is only planned without a bias, for a bf16 output and batch 1");
  const GemmKey key = key_of(g);
  auto it = ctx.plans.find(key);
  if (it == ctx.plans.end()) it = ctx.plans.emplace(key, make_plan(ctx, g, key)).first;
  GemmPlan& p = it->second;
  if (!p.supported) return false;
  if (g.bias)
    CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &g.bias, sizeof(g.bias)));
  if (g.gelu_aux)
    CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &g.gelu_aux,
                                                sizeof(g.gelu_aux)));
  if (g.dgelu_aux)
    CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &g.dgelu_aux,
                                                sizeof(g.dgelu_aux)));
  // C and D are the same buffer with the same layout (in place); with beta 0 C is not read.
  const cublasStatus_t st = cublasLtMatmul(ctx.handle, p.op, &g.alpha, g.B, p.a, g.A, p.b, &g.beta, g.C, p.d,
                                           g.C, p.d, &p.algo, ctx.workspace, ctx.workspace_bytes, stream);
  // An epilogue the heuristic offered but the launch refuses (nothing was enqueued): the caller falls back,
  // and so does every later call of this shape.
  if (st == CUBLAS_STATUS_NOT_SUPPORTED && (g.gelu_aux || g.dgelu_aux)) {
    p.supported = false;
    return false;
  }
  GPT_CHECK(st == CUBLAS_STATUS_SUCCESS, "cuda gemm: cublasLtMatmul failed (", cublasLtGetStatusName(st), ") for ",
            shape_name(g));
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
// dinp (N,C) = dout (N,OC) @ w (OC,C): the input gradient of a linear layer.
GemmSpec input_gradient(bf16* dinp, const bf16* dout, const bf16* w, int N, int C, int OC) {
  GemmSpec g;
  g.M = N, g.N = C, g.K = OC;
  g.A = dout, g.lda = OC;
  g.B = w, g.ldb = C;
  g.C = dinp, g.ldc = C;
  return g;
}
}  // namespace

bool bias_epilogue_ok(const bf16* bias, int OC) { return bias && OC % kVec == 0 && aligned16(bias); }

void matmul_forward(bf16* out, const bf16* inp, const bf16* w, const bf16* bias, int N, int C, int OC,
                    const BlasContext& ctx, cudaStream_t stream) {
  if (N == 0) return;
  if (!bias || bias_epilogue_ok(bias, OC)) {
    gemm(ctx, linear(out, inp, w, bias, N, C, OC), stream);
    return;
  }
  gemm(ctx, linear(out, inp, w, nullptr, N, C, OC), stream);  // a bias the epilogue may misread: added after
  bias_forward(out, bias, N, OC, stream);
}

void matmul_gelu_forward(bf16* out, bf16* pre, const bf16* inp, const bf16* w, const bf16* bias, int N, int C,
                         int OC, const BlasContext& ctx, cudaStream_t stream) {
  if (N == 0) return;
  GemmSpec g = linear(out, inp, w, bias, N, C, OC);
  g.gelu_aux = pre;
  // The epilogue's aux output wants 16-byte alignment and a leading dimension divisible by 8; its bias is
  // read as the plain bias epilogue reads it.
  const bool aux_ok = aligned16(pre) && OC % kVec == 0;
  if (bias_epilogue_ok(bias, OC) && aux_ok && try_gemm(ctx, g, stream)) return;
  matmul_forward(pre, inp, w, bias, N, C, OC, ctx, stream);
  gelu_forward(out, pre, static_cast<size_t>(N) * OC, stream);
}

void matmul_backward(bf16* dinp, float* dw, float* dbias, const bf16* dout, const bf16* inp, const bf16* w,
                     int N, int C, int OC, const BlasContext& ctx, void* scratch, cudaStream_t stream) {
  if (N == 0) return;
  if (dinp) gemm(ctx, input_gradient(dinp, dout, w, N, C, OC), stream);
  {
    GemmSpec g;
    g.M = OC, g.N = C, g.K = N;
    g.A = dout, g.lda = OC, g.trans_a = true;
    g.B = inp, g.ldb = C;
    g.C = dw, g.ldc = C, g.c_f32 = true;
    g.beta = 1.0f;  // accumulate
    gemm(ctx, g, stream);
  }
  bias_backward(dbias, dout, N, OC, scratch, stream);
}

void gelu_matmul_backward(bf16* dpre, float* dw, float* dbias, const bf16* dout, const bf16* inp, const bf16* pre,
                          const bf16* w, int N, int C, int OC, const BlasContext& ctx, void* scratch,
                          cudaStream_t stream) {
  if (N == 0) return;
  // dpre (N x C) = gelu'(pre) * (dout (N x OC) @ w (OC x C)): the input-gradient product of
  // matmul_backward with the DGELU epilogue (aux = pre: 16-byte aligned, leading dimension C % 8 == 0).
  GemmSpec g = input_gradient(dpre, dout, w, N, C, OC);
  g.dgelu_aux = pre;
  const bool aux_ok = aligned16(pre) && aligned16(dpre) && C % kVec == 0;
  if (!(aux_ok && try_gemm(ctx, g, stream))) {
    gemm(ctx, input_gradient(dpre, dout, w, N, C, OC), stream);
    gelu_backward(dpre, pre, dpre, static_cast<size_t>(N) * C, stream);  // in place
  }
  matmul_backward(nullptr, dw, dbias, dout, inp, w, N, C, OC, ctx, scratch, stream);
}

}  // namespace gpt::cuda
