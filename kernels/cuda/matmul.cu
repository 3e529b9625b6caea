// Matrix products on the GPU through cuBLASLt (twin of kernels/cpu/matmul.cpp), plus the bias-gradient
// reduction. bf16 operands, fp32 compute (CUBLAS_COMPUTE_32F, fp32 alpha/beta); outputs bf16 for
// activations and fp32 for weight gradients (bf16 A/B with fp32 C/D is one of cuBLASLt's listed type
// combinations for CUBLAS_COMPUTE_32F).
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
#include "ops.cuh"

namespace gpt::cuda {
namespace {

constexpr int kChunks = 64;   // row chunks of the bias-gradient reduction (fixed: deterministic)
constexpr int kColTile = 32;  // columns per block
constexpr int kRowThreads = 8;

// Largest power of two (<= 256) dividing the address of every batch's matrix.
uint32_t alignment_of(const void* p, long long stride_elems, size_t elem_bytes, int batch) {
  uint64_t bits = reinterpret_cast<uintptr_t>(p);
  if (batch > 1) bits |= static_cast<uint64_t>(stride_elems) * elem_bytes;
  uint32_t a = 256;
  while (a > 1 && (bits % a) != 0) a /= 2;
  return a;
}

// Owns the cuBLASLt descriptors of one call, so an error path leaks nothing.
struct LtCall {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr;
  cublasLtMatmulPreference_t pref = nullptr;
  ~LtCall() {
    if (pref) cublasLtMatmulPreferenceDestroy(pref);
    if (d) cublasLtMatrixLayoutDestroy(d);
    if (b) cublasLtMatrixLayoutDestroy(b);
    if (a) cublasLtMatrixLayoutDestroy(a);
    if (op) cublasLtMatmulDescDestroy(op);
  }
};

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

void gemm(const BlasContext& ctx, const GemmSpec& g, cudaStream_t stream) {
  GPT_CHECK(g.M > 0 && g.N > 0 && g.K > 0 && g.batch > 0, "cuda gemm: empty product M=", g.M, " N=", g.N,
            " K=", g.K, " batch=", g.batch);
  GPT_CHECK(!g.bias || (!g.c_f32 && g.batch == 1), "cuda gemm: a bias needs a bf16 output and batch 1");
  const cudaDataType_t c_type = g.c_f32 ? CUDA_R_32F : CUDA_R_16BF;
  const size_t c_bytes = g.c_f32 ? sizeof(float) : sizeof(bf16);
  LtCall call;
  CUBLAS_CHECK(cublasLtMatmulDescCreate(&call.op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  const cublasOperation_t op1 = g.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;  // cuBLASLt "A" is our B
  const cublasOperation_t op2 = g.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;  // cuBLASLt "B" is our A
  CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(call.op, CUBLASLT_MATMUL_DESC_TRANSA, &op1, sizeof(op1)));
  CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(call.op, CUBLASLT_MATMUL_DESC_TRANSB, &op2, sizeof(op2)));
  if (g.bias) {
    const cublasLtEpilogue_t epi = CUBLASLT_EPILOGUE_BIAS;  // bias type defaults to D's type (bf16)
    CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(call.op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof(epi)));
    CUBLAS_CHECK(
        cublasLtMatmulDescSetAttribute(call.op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &g.bias, sizeof(g.bias)));
  }
  if (g.trans_b)
    make_layout(&call.a, CUDA_R_16BF, g.K, g.N, g.ldb, g.batch, g.stride_b);
  else
    make_layout(&call.a, CUDA_R_16BF, g.N, g.K, g.ldb, g.batch, g.stride_b);
  if (g.trans_a)
    make_layout(&call.b, CUDA_R_16BF, g.M, g.K, g.lda, g.batch, g.stride_a);
  else
    make_layout(&call.b, CUDA_R_16BF, g.K, g.M, g.lda, g.batch, g.stride_a);
  make_layout(&call.d, c_type, g.N, g.M, g.ldc, g.batch, g.stride_c);

  CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&call.pref));
  const uint64_t ws = ctx.workspace_bytes;
  CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(call.pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws,
                                                    sizeof(ws)));
  // The default assumes 256-byte aligned operands; say what ours really are.
  const uint32_t align_c = alignment_of(g.C, g.stride_c, c_bytes, g.batch);
  set_pref_alignment(call.pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES,
                     alignment_of(g.B, g.stride_b, sizeof(bf16), g.batch));
  set_pref_alignment(call.pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
                     alignment_of(g.A, g.stride_a, sizeof(bf16), g.batch));
  set_pref_alignment(call.pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, align_c);
  set_pref_alignment(call.pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, align_c);

  cublasLtMatmulHeuristicResult_t heur{};
  int found = 0;
  // "No algorithm" comes back either as found == 0 or as CUBLAS_STATUS_NOT_SUPPORTED: name the product.
  const cublasStatus_t st = cublasLtMatmulAlgoGetHeuristic(ctx.handle, call.op, call.a, call.b, call.d, call.d,
                                                           call.pref, 1, &heur, &found);
  GPT_CHECK(st == CUBLAS_STATUS_SUCCESS && found > 0, "cuda gemm: cuBLASLt has no algorithm (",
            cublasLtGetStatusName(st), ") for M=", g.M, " N=", g.N, " K=", g.K, " lda=", g.lda, " ldb=", g.ldb,
            " ldc=", g.ldc, " batch=", g.batch, " trans_a=", g.trans_a, " trans_b=", g.trans_b,
            " fp32_out=", g.c_f32, " bias=", g.bias != nullptr);
  // C and D are the same buffer with the same layout (in place); with beta 0 C is not read.
  CUBLAS_CHECK(cublasLtMatmul(ctx.handle, call.op, &g.alpha, g.B, call.a, g.A, call.b, &g.beta, g.C, call.d,
                              g.C, call.d, &heur.algo, ctx.workspace, ctx.workspace_bytes, stream));
}

void matmul_forward(bf16* out, const bf16* inp, const bf16* w, const bf16* bias, int N, int C, int OC,
                    const BlasContext& ctx, cudaStream_t stream) {
  if (N == 0) return;
  GemmSpec g;
  g.M = N, g.N = OC, g.K = C;
  g.A = inp, g.lda = C;
  g.B = w, g.ldb = C, g.trans_b = true;
  g.C = out, g.ldc = OC;
  g.bias = bias;
  gemm(ctx, g, stream);
}

size_t matmul_backward_scratch_bytes(int N, int OC) {
  return static_cast<size_t>(kChunks) * OC * sizeof(float);
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
