// cuBLASLt on the CPU for the SIMT emulator build: the subset matmul.cu calls, executed as a plain loop in
// double precision, so the emulated CUDA backend's products are exact references and the tests exercise
// matmul.cu's descriptor setup (transposes, leading dimensions, batches, epilogues).
//
// Semantics as cublasLt.h and the cuBLAS guide define them, column-major, per batch:
//   x = alpha * op(A) op(B) + beta * C: products summed in double, then alpha, beta and the bias in fp32 (the
//   scale type); C is not read when beta == 0. BIAS: x += bias[row] (one per row of D, broadcast over its
//   columns). GELU*: D = gelu(x), tanh form; GELU_AUX*: also aux = x (EPILOGUE_AUX_LD in elements). DGELU:
//   D = x * gelu'(aux). gelu and gelu' in double; one rounding to D's type (bf16: to nearest even). Types:
//   COMPUTE_32F, scale CUDA_R_32F, A/B bf16 with C = D bf16 or fp32, or all fp32; bias and aux in D's type
//   (their defaults), one bias for every batch, aux epilogues on batch 1 only.
// Refused (INVALID_VALUE or NOT_SUPPORTED, with a line on stderr): attribute buffers of the wrong size, shapes
// that do not chain, ld < rows, unequal batch counts, an aux ld below D's rows or not a multiple of 8, null
// data, pointers off their element, anything not emulated. Modelled, not copied: the heuristic's algorithm
// (one, no workspace) records the alignment each operand may be assumed to have (A..D: the preference's;
// bias, aux: their pointers' values, read as the real heuristic reads them; capped at 16 bytes, a kernel's
// widest load), and cublasLtMatmul refuses a pointer less aligned, which a GPU kernel might misread instead.
// A product runs with its stream (streams.h), as the library's kernels do.
#include <cublasLt.h>
#include <cuda_bf16.h>

#include <algorithm>
#include <cmath>
#include <cstdarg>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <vector>

#include "tests/simt/streams.h"

struct cublasLtContext {  // the handle: nothing to hold
  uint64_t magic;
};

namespace {

constexpr uint64_t kHandleMagic = 0x53494d54'4c540001ull, kDescMagic = 0x53494d54'4c540002ull,
                   kLayoutMagic = 0x53494d54'4c540003ull, kPrefMagic = 0x53494d54'4c540004ull,
                   kAlgoMagic = 0x53494d54'4c540005ull;
constexpr uint32_t kMaxVectorBytes = 16;

// The descriptors behind the opaque pointers: one field per attribute the emulator accepts, in the attribute's
// own type so SetAttribute can check the buffer's size (compute and scale come from cublasLtMatmulDescCreate).
struct Layout {
  uint64_t magic = kLayoutMagic;
  uint32_t type = CUDA_R_32F;
  int32_t order = CUBLASLT_ORDER_COL, batch = 1;
  int64_t rows = 0, cols = 0, ld = 0, stride = 0;  // rows and cols are uint64_t attributes: same size
};
struct Desc {
  uint64_t magic = kDescMagic;
  int32_t compute = 0, scale = 0, transa = CUBLAS_OP_N, transb = CUBLAS_OP_N;
  uint32_t epilogue = CUBLASLT_EPILOGUE_DEFAULT;
  const void* bias = nullptr;
  void* aux = nullptr;
  int64_t aux_ld = 0;
};
struct Pref {
  uint64_t magic = kPrefMagic, max_workspace = 0;
  uint32_t align[4] = {256, 256, 256, 256};  // A, B, C, D (bytes)
};

enum Operand { kA, kB, kC, kD, kBias, kAux, kOperands };
const char* const kNames[kOperands] = {"A", "B", "C", "D", "bias", "aux"};

// What the heuristic hands out inside cublasLtMatmulAlgo_t: the alignment (bytes) each operand may rely on.
struct Algo {
  uint64_t magic;
  uint32_t align[kOperands];
};
static_assert(sizeof(Algo) <= sizeof(cublasLtMatmulAlgo_t), "the algorithm fits the public struct");

// One checked product: the shape cuBLASLt's terms give it and the resolved types.
struct Problem {
  const Desc* op = nullptr;
  const Layout* L[4] = {};  // A, B, C, D
  int64_t m = 0, n = 0, k = 0, batch = 1;
  uint32_t bias_type = 0, aux_type = 0;  // D's (the attributes that would change them are not emulated)
  bool bias = false, gelu = false, aux_out = false, dgelu = false;
};

// Every refusal: a line on stderr naming the problem, and the status the library would return.
cublasStatus_t fail(cublasStatus_t st, const char* fmt, ...) {
  char line[512];
  std::va_list args;
  va_start(args, fmt);
  std::vsnprintf(line, sizeof(line), fmt, args);
  va_end(args);
  std::fprintf(stderr, "cublasLt (SIMT emulator): %s: %s\n", cublasLtGetStatusName(st), line);
  return st;
}

template <typename T, typename Handle>
T* unwrap(Handle h, uint64_t magic) {
  T* x = reinterpret_cast<T*>(h);
  return x && x->magic == magic ? x : nullptr;
}

// Destroying null is a no-op. The magic is cleared first, so a stale descriptor is likely refused on use.
template <typename T, typename Handle>
cublasStatus_t destroy(Handle h, uint64_t magic) {
  T* x = unwrap<T>(h, magic);
  if (h && !x) return fail(CUBLAS_STATUS_INVALID_VALUE, "Destroy: not a live descriptor of that kind");
  if (x) x->magic = 0;
  delete x;
  return CUBLAS_STATUS_SUCCESS;
}

// An attribute the emulator accepts: where its value goes in the descriptor and its size.
struct Field {
  int attr;
  size_t offset, size;
};
#define GPT_SIMT_FIELD(T, attr, f) \
  Field { attr, offsetof(T, f), sizeof(T::f) }

// Every SetAttribute: a buffer whose size is not the attribute's is INVALID_VALUE (cublasLt.h).
template <typename T, size_t N>
cublasStatus_t set_attribute(const char* what, T* x, const Field (&fields)[N], int attr, const void* buf, size_t size) {
  if (!x || !buf) return fail(CUBLAS_STATUS_INVALID_VALUE, "%sSetAttribute %d: null descriptor or buffer", what, attr);
  for (const Field& f : fields) {
    if (f.attr != attr) continue;
    if (size != f.size)
      return fail(CUBLAS_STATUS_INVALID_VALUE, "%sSetAttribute %d: %zu bytes, the attribute has %zu", what, attr, size,
                  f.size);
    std::memcpy(reinterpret_cast<char*>(x) + f.offset, buf, size);
    return CUBLAS_STATUS_SUCCESS;
  }
  return fail(CUBLAS_STATUS_NOT_SUPPORTED, "%sSetAttribute: attribute %d is not emulated", what, attr);
}

#define GPT_SIMT_DESC(attr, f) GPT_SIMT_FIELD(Desc, CUBLASLT_MATMUL_DESC_##attr, f)
const Field kDescFields[] = {GPT_SIMT_DESC(TRANSA, transa),
                             GPT_SIMT_DESC(TRANSB, transb),
                             GPT_SIMT_DESC(EPILOGUE, epilogue),
                             GPT_SIMT_DESC(BIAS_POINTER, bias),
                             GPT_SIMT_DESC(EPILOGUE_AUX_POINTER, aux),
                             GPT_SIMT_DESC(EPILOGUE_AUX_LD, aux_ld)};
#define GPT_SIMT_LAYOUT(attr, f) GPT_SIMT_FIELD(Layout, CUBLASLT_MATRIX_LAYOUT_##attr, f)
const Field kLayoutFields[] = {GPT_SIMT_LAYOUT(TYPE, type),
                               GPT_SIMT_LAYOUT(ORDER, order),
                               GPT_SIMT_LAYOUT(ROWS, rows),
                               GPT_SIMT_LAYOUT(COLS, cols),
                               GPT_SIMT_LAYOUT(LD, ld),
                               GPT_SIMT_LAYOUT(BATCH_COUNT, batch),
                               GPT_SIMT_LAYOUT(STRIDED_BATCH_OFFSET, stride)};
#define GPT_SIMT_PREF(attr, f) GPT_SIMT_FIELD(Pref, CUBLASLT_MATMUL_PREF_##attr, f)
const Field kPrefFields[] = {
    GPT_SIMT_PREF(MAX_WORKSPACE_BYTES, max_workspace), GPT_SIMT_PREF(MIN_ALIGNMENT_A_BYTES, align[kA]),
    GPT_SIMT_PREF(MIN_ALIGNMENT_B_BYTES, align[kB]), GPT_SIMT_PREF(MIN_ALIGNMENT_C_BYTES, align[kC]),
    GPT_SIMT_PREF(MIN_ALIGNMENT_D_BYTES, align[kD])};
#undef GPT_SIMT_DESC
#undef GPT_SIMT_LAYOUT
#undef GPT_SIMT_PREF
#undef GPT_SIMT_FIELD

long long LL(int64_t v) { return static_cast<long long>(v); }
bool handle_ok(cublasLtHandle_t h) { return h && h->magic == kHandleMagic; }
size_t elem_bytes(uint32_t type) { return type == CUDA_R_16BF ? 2 : 4; }

// Largest power of two (<= 256) dividing the address of every batch's matrix.
uint32_t alignment(const void* p, int64_t stride_bytes, int64_t batch) {
  uint64_t bits = reinterpret_cast<uintptr_t>(p);
  if (batch > 1) bits |= static_cast<uint64_t>(stride_bytes);
  uint32_t a = 256;
  while (a > 1 && bits % a != 0) a /= 2;
  return a;
}
uint32_t cap(uint32_t a) { return a == 0 ? 1 : std::min<uint32_t>(a & (~a + 1), kMaxVectorBytes); }

float load(const void* base, uint32_t type, int64_t i) {
  if (type == CUDA_R_16BF) return __bfloat162float(static_cast<const __nv_bfloat16*>(base)[i]);
  return static_cast<const float*>(base)[i];
}
void store(void* base, uint32_t type, int64_t i, double v) {
  const float f = static_cast<float>(v);
  if (type == CUDA_R_16BF)
    static_cast<__nv_bfloat16*>(base)[i] = __float2bfloat16_rn(f);
  else
    static_cast<float*>(base)[i] = f;
}

constexpr double kSqrt2OverPi = 0.79788456080286535588, kCubic = 0.044715;
double gelu(double x) { return 0.5 * x * (1.0 + std::tanh(kSqrt2OverPi * (x + kCubic * x * x * x))); }
double gelu_grad(double x) {
  const double t = std::tanh(kSqrt2OverPi * (x + kCubic * x * x * x));
  return 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * kSqrt2OverPi * (1.0 + 3.0 * kCubic * x * x);
}

// Types, orders, transposes and the epilogue: what an implementation may simply not offer (NOT_SUPPORTED).
cublasStatus_t check_support(Problem& p) {
  const Desc& op = *p.op;
  if (op.compute != CUBLAS_COMPUTE_32F || op.scale != CUDA_R_32F)
    return fail(CUBLAS_STATUS_NOT_SUPPORTED, "compute %d, scale %d: only COMPUTE_32F with CUDA_R_32F", op.compute,
                op.scale);
  const uint32_t ta = p.L[kA]->type, tb = p.L[kB]->type, tc = p.L[kC]->type, td = p.L[kD]->type;
  const bool bf16_in = ta == CUDA_R_16BF && tb == CUDA_R_16BF && (td == CUDA_R_16BF || td == CUDA_R_32F);
  const bool f32 = ta == CUDA_R_32F && tb == CUDA_R_32F && td == CUDA_R_32F;
  if (!(bf16_in || f32) || tc != td)
    return fail(CUBLAS_STATUS_NOT_SUPPORTED,
                "types A %u B %u C %u D %u: not A/B bf16 with C = D bf16/fp32, nor all fp32", ta, tb, tc, td);
  for (int i = 0; i < 4; i++)
    if (p.L[i]->order != CUBLASLT_ORDER_COL)
      return fail(CUBLAS_STATUS_NOT_SUPPORTED, "layout of %s: only CUBLASLT_ORDER_COL is emulated", kNames[i]);
  const auto nt = [](int32_t t) { return t == CUBLAS_OP_N || t == CUBLAS_OP_T; };
  if (!nt(op.transa) || !nt(op.transb))
    return fail(CUBLAS_STATUS_NOT_SUPPORTED, "transa %d, transb %d: only CUBLAS_OP_N and _T", op.transa, op.transb);
  const uint32_t e = op.epilogue;
  p.bias = e == CUBLASLT_EPILOGUE_BIAS || e == CUBLASLT_EPILOGUE_GELU_BIAS || e == CUBLASLT_EPILOGUE_GELU_AUX_BIAS;
  p.gelu = e == CUBLASLT_EPILOGUE_GELU || e == CUBLASLT_EPILOGUE_GELU_AUX || e == CUBLASLT_EPILOGUE_GELU_BIAS ||
           e == CUBLASLT_EPILOGUE_GELU_AUX_BIAS;
  p.aux_out = e == CUBLASLT_EPILOGUE_GELU_AUX || e == CUBLASLT_EPILOGUE_GELU_AUX_BIAS;
  p.dgelu = e == CUBLASLT_EPILOGUE_DGELU;
  if (!(p.bias || p.gelu || p.dgelu || e == CUBLASLT_EPILOGUE_DEFAULT))
    return fail(CUBLAS_STATUS_NOT_SUPPORTED, "epilogue %u is not emulated (DEFAULT, BIAS, GELU*, DGELU are)", e);
  p.bias_type = p.aux_type = td;
  return CUBLAS_STATUS_SUCCESS;
}

// Shapes, leading dimensions, batches and the epilogue's documented rules (INVALID_VALUE).
cublasStatus_t check_shape(Problem& p) {
  const Desc& op = *p.op;
  const Layout &A = *p.L[kA], &B = *p.L[kB], &C = *p.L[kC], &D = *p.L[kD];
  p.m = D.rows, p.n = D.cols, p.batch = D.batch;
  const int64_t am = op.transa == CUBLAS_OP_N ? A.rows : A.cols, ak = op.transa == CUBLAS_OP_N ? A.cols : A.rows;
  const int64_t bk = op.transb == CUBLAS_OP_N ? B.rows : B.cols, bn = op.transb == CUBLAS_OP_N ? B.cols : B.rows;
  p.k = ak;
  if (am != p.m || bn != p.n || bk != ak || C.rows != D.rows || C.cols != D.cols)
    return fail(CUBLAS_STATUS_INVALID_VALUE,
                "shapes do not chain: op(A) %lldx%lld, op(B) %lldx%lld, C %lldx%lld, D %lldx%lld", LL(am), LL(ak),
                LL(bk), LL(bn), LL(C.rows), LL(C.cols), LL(D.rows), LL(D.cols));
  for (int i = 0; i < 4; i++) {
    const Layout& l = *p.L[i];
    if (l.rows < 0 || l.rows > INT32_MAX || l.cols < 0 || l.cols > INT32_MAX)
      return fail(CUBLAS_STATUS_NOT_SUPPORTED, "%s is %lldx%lld: beyond int32", kNames[i], LL(l.rows), LL(l.cols));
    if (l.ld < std::max<int64_t>(1, l.rows))
      return fail(CUBLAS_STATUS_INVALID_VALUE, "%s: leading dimension %lld below its %lld rows", kNames[i], LL(l.ld),
                  LL(l.rows));
    if (l.batch < 1 || l.batch != D.batch)
      return fail(CUBLAS_STATUS_INVALID_VALUE, "%s: batch count %d, D's is %d", kNames[i], l.batch, D.batch);
  }
  if (p.aux_out || p.dgelu) {
    if (op.aux_ld < p.m || op.aux_ld % 8 != 0)
      return fail(CUBLAS_STATUS_INVALID_VALUE, "EPILOGUE_AUX_LD %lld: must be a multiple of 8 and >= D's %lld rows",
                  LL(op.aux_ld), LL(p.m));
    if (p.batch > 1)  // each batch's aux would need EPILOGUE_AUX_BATCH_STRIDE
      return fail(CUBLAS_STATUS_NOT_SUPPORTED, "GELU aux epilogues over %lld batches are not emulated", LL(p.batch));
  }
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t check(Problem& p, cublasLtMatmulDesc_t op, cublasLtMatrixLayout_t A, cublasLtMatrixLayout_t B,
                     cublasLtMatrixLayout_t C, cublasLtMatrixLayout_t D) {
  p.op = unwrap<Desc>(op, kDescMagic);
  const cublasLtMatrixLayout_t in[4] = {A, B, C, D};
  for (int i = 0; i < 4; i++) p.L[i] = unwrap<Layout>(in[i], kLayoutMagic);
  if (!p.op || !p.L[kA] || !p.L[kB] || !p.L[kC] || !p.L[kD])
    return fail(CUBLAS_STATUS_INVALID_VALUE, "a null or destroyed matmul or layout descriptor");
  const cublasStatus_t st = check_support(p);
  return st != CUBLAS_STATUS_SUCCESS ? st : check_shape(p);
}

Algo choose(const Desc& op, const Pref& pref) {
  Algo a{kAlgoMagic, {}};
  for (int i = 0; i < 4; i++) a.align[i] = cap(pref.align[i]);
  a.align[kBias] = op.bias ? cap(alignment(op.bias, 0, 1)) : kMaxVectorBytes;
  a.align[kAux] = op.aux ? cap(alignment(op.aux, 0, 1)) : kMaxVectorBytes;
  return a;
}

// Every pointer the product reads or writes: present, aligned to its element and to what the algorithm
// was chosen for.
cublasStatus_t check_pointers(const Problem& p, const Algo& algo, const void* const ptr[kOperands], float beta) {
  const bool needed[kOperands] = {p.k > 0, p.k > 0, beta != 0.0f, true, p.bias, p.aux_out || p.dgelu};
  const uint32_t types[kOperands] = {p.L[kA]->type, p.L[kB]->type, p.L[kC]->type,
                                     p.L[kD]->type, p.bias_type,   p.aux_type};
  for (int i = 0; i < kOperands; i++) {
    if (!needed[i]) continue;
    if (!ptr[i]) return fail(CUBLAS_STATUS_INVALID_VALUE, "%s pointer is null", kNames[i]);
    const size_t eb = elem_bytes(types[i]);
    const int64_t stride = i < 4 ? p.L[i]->stride : 0;  // one bias for every batch (BIAS_BATCH_STRIDE 0)
    const uint32_t have = alignment(ptr[i], stride * static_cast<int64_t>(eb), p.batch);
    if (have < eb || have < algo.align[i])
      return fail(CUBLAS_STATUS_INVALID_VALUE, "%s pointer %p (batch stride %lld) is %u-byte aligned, below %u",
                  kNames[i], ptr[i], LL(stride), have, std::max<uint32_t>(algo.align[i], static_cast<uint32_t>(eb)));
  }
  const Layout &C = *p.L[kC], &D = *p.L[kD];
  if (beta != 0.0f && ptr[kC] == ptr[kD] && (C.ld != D.ld || C.type != D.type || C.stride != D.stride))
    return fail(CUBLAS_STATUS_INVALID_VALUE, "in place (C == D) with different C and D layouts");
  return CUBLAS_STATUS_SUCCESS;
}

// sum over l of a[l] * b[l], each product exact in double, added in 8 partial sums (lane l mod 8; the tail in
// lane 0) and those pairwise: an order fixed by k alone, whose independent chains the compiler can keep in
// vector registers, where one running sum waits on each add (the emulated products were half of a CUDA
// test's time).
double dot(const float* a, const float* b, int64_t k) {
  double s[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t l = 0;
  for (; l + 8 <= k; l += 8)
    for (int q = 0; q < 8; q++) s[q] += static_cast<double>(a[l + q]) * b[l + q];
  for (; l < k; l++) s[0] += static_cast<double>(a[l]) * b[l];
  return ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
}

// The product, batch by batch: op(A) gathered row by row (m x k) and op(B) column by column (n x k), so
// each element's sum runs over contiguous memory; then the scaling and epilogue of the header's table.
void run(const Problem& p, float alpha, float beta, const void* const ptr[kOperands]) {
  const Desc& op = *p.op;
  const Layout &A = *p.L[kA], &B = *p.L[kB], &C = *p.L[kC], &D = *p.L[kD];
  const bool na = op.transa == CUBLAS_OP_N, nb = op.transb == CUBLAS_OP_N;
  std::vector<float> va(static_cast<size_t>(p.m * p.k)), vb(static_cast<size_t>(p.n * p.k));
  float *opa = va.data(), *opb = vb.data();
  for (int64_t b = 0; b < p.batch; b++) {
    for (int64_t i = 0; i < p.m; i++)
      for (int64_t l = 0; l < p.k; l++)
        opa[i * p.k + l] = load(ptr[kA], A.type, b * A.stride + (na ? i + l * A.ld : l + i * A.ld));
    for (int64_t j = 0; j < p.n; j++)
      for (int64_t l = 0; l < p.k; l++)
        opb[j * p.k + l] = load(ptr[kB], B.type, b * B.stride + (nb ? l + j * B.ld : j + l * B.ld));
    for (int64_t j = 0; j < p.n; j++) {
      for (int64_t i = 0; i < p.m; i++) {
        const double acc = dot(opa + i * p.k, opb + j * p.k, p.k);
        float x = alpha * static_cast<float>(acc);  // the scale type's arithmetic
        if (beta != 0.0f) x += beta * load(ptr[kC], C.type, b * C.stride + i + j * C.ld);
        if (p.bias) x += load(ptr[kBias], p.bias_type, i);
        const int64_t ai = i + j * op.aux_ld;  // batch 1
        if (p.aux_out) store(const_cast<void*>(ptr[kAux]), p.aux_type, ai, x);
        double out = x;
        if (p.gelu) out = gelu(x);
        if (p.dgelu) out = x * gelu_grad(load(ptr[kAux], p.aux_type, ai));
        store(const_cast<void*>(ptr[kD]), D.type, b * D.stride + i + j * D.ld, out);
      }
    }
  }
}

// A product queued on a stream: the problem with its own copies of the descriptors it points to.
struct Queued {
  Desc op;
  Layout L[4];
  Problem p;
  float alpha, beta;
  const void* ptr[kOperands];
  Queued(const Problem& problem, float a, float b, const void* const operands[kOperands])
      : op(*problem.op), p(problem), alpha(a), beta(b) {
    p.op = &op;
    for (int i = 0; i < 4; i++) L[i] = *problem.L[i], p.L[i] = &L[i];
    std::copy(operands, operands + kOperands, ptr);
  }
};

}  // namespace

extern "C" {

cublasStatus_t cublasLtCreate(cublasLtHandle_t* handle) {
  if (!handle) return fail(CUBLAS_STATUS_INVALID_VALUE, "cublasLtCreate: null handle pointer");
  *handle = new cublasLtContext{kHandleMagic};
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtDestroy(cublasLtHandle_t handle) {
  if (!handle_ok(handle)) return fail(CUBLAS_STATUS_NOT_INITIALIZED, "cublasLtDestroy: not a live handle");
  handle->magic = 0;
  delete handle;
  return CUBLAS_STATUS_SUCCESS;
}

const char* cublasLtGetStatusName(cublasStatus_t status) {
#define GPT_SIMT_STATUS(s) \
  { s, #s }
  static const struct {
    cublasStatus_t status;
    const char* name;
  } kStatuses[] = {GPT_SIMT_STATUS(CUBLAS_STATUS_SUCCESS),          GPT_SIMT_STATUS(CUBLAS_STATUS_NOT_INITIALIZED),
                   GPT_SIMT_STATUS(CUBLAS_STATUS_ALLOC_FAILED),     GPT_SIMT_STATUS(CUBLAS_STATUS_INVALID_VALUE),
                   GPT_SIMT_STATUS(CUBLAS_STATUS_ARCH_MISMATCH),    GPT_SIMT_STATUS(CUBLAS_STATUS_MAPPING_ERROR),
                   GPT_SIMT_STATUS(CUBLAS_STATUS_EXECUTION_FAILED), GPT_SIMT_STATUS(CUBLAS_STATUS_INTERNAL_ERROR),
                   GPT_SIMT_STATUS(CUBLAS_STATUS_NOT_SUPPORTED),    GPT_SIMT_STATUS(CUBLAS_STATUS_LICENSE_ERROR)};
#undef GPT_SIMT_STATUS
  for (const auto& s : kStatuses)
    if (s.status == status) return s.name;
  return "CUBLAS_STATUS_UNKNOWN";
}

const char* cublasLtGetStatusString(cublasStatus_t status) {
  if (status == CUBLAS_STATUS_SUCCESS) return "success";
  if (status == CUBLAS_STATUS_INVALID_VALUE) return "an invalid value was used as an argument";
  if (status == CUBLAS_STATUS_NOT_SUPPORTED) return "the functionality requested is not supported";
  return status == CUBLAS_STATUS_NOT_INITIALIZED ? "the library was not initialized" : "an unexpected status";
}

cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t* desc, cublasComputeType_t compute, cudaDataType_t scale) {
  if (!desc) return fail(CUBLAS_STATUS_INVALID_VALUE, "cublasLtMatmulDescCreate: null descriptor pointer");
  Desc* d = new Desc;
  d->compute = compute, d->scale = scale;
  *desc = reinterpret_cast<cublasLtMatmulDesc_t>(d);
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t desc, cublasLtMatmulDescAttributes_t attr,
                                              const void* buf, size_t size) {
  return set_attribute("MatmulDesc", unwrap<Desc>(desc, kDescMagic), kDescFields, attr, buf, size);
}

cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t* layout, cudaDataType type, uint64_t rows,
                                          uint64_t cols, int64_t ld) {
  if (!layout) return fail(CUBLAS_STATUS_INVALID_VALUE, "cublasLtMatrixLayoutCreate: null layout pointer");
  if (ld < 0) return fail(CUBLAS_STATUS_INVALID_VALUE, "cublasLtMatrixLayoutCreate: negative ld %lld", LL(ld));
  Layout* l = new Layout;
  l->type = type, l->rows = static_cast<int64_t>(rows), l->cols = static_cast<int64_t>(cols), l->ld = ld;
  *layout = reinterpret_cast<cublasLtMatrixLayout_t>(l);
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatrixLayoutSetAttribute(cublasLtMatrixLayout_t layout, cublasLtMatrixLayoutAttribute_t attr,
                                                const void* buf, size_t size) {
  return set_attribute("MatrixLayout", unwrap<Layout>(layout, kLayoutMagic), kLayoutFields, attr, buf, size);
}

cublasStatus_t cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t* pref) {
  if (!pref) return fail(CUBLAS_STATUS_INVALID_VALUE, "cublasLtMatmulPreferenceCreate: null pointer");
  *pref = reinterpret_cast<cublasLtMatmulPreference_t>(new Pref);
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t desc) { return destroy<Desc>(desc, kDescMagic); }
cublasStatus_t cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t l) { return destroy<Layout>(l, kLayoutMagic); }
cublasStatus_t cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t p) { return destroy<Pref>(p, kPrefMagic); }

cublasStatus_t cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t pref,
                                                    cublasLtMatmulPreferenceAttributes_t attr, const void* buf,
                                                    size_t size) {
  return set_attribute("MatmulPreference", unwrap<Pref>(pref, kPrefMagic), kPrefFields, attr, buf, size);
}

// One algorithm for any product run() can execute (no workspace); NOT_SUPPORTED or INVALID_VALUE, with no
// algorithm, otherwise.
cublasStatus_t cublasLtMatmulAlgoGetHeuristic(cublasLtHandle_t handle, cublasLtMatmulDesc_t op,
                                              cublasLtMatrixLayout_t A, cublasLtMatrixLayout_t B,
                                              cublasLtMatrixLayout_t C, cublasLtMatrixLayout_t D,
                                              cublasLtMatmulPreference_t preference, int requested,
                                              cublasLtMatmulHeuristicResult_t results[], int* count) {
  if (count) *count = 0;
  if (!handle_ok(handle)) return fail(CUBLAS_STATUS_NOT_INITIALIZED, "AlgoGetHeuristic: not a live handle");
  if (requested <= 0 || !results || !count)
    return fail(CUBLAS_STATUS_INVALID_VALUE, "AlgoGetHeuristic: %d algorithms requested, results %p, count %p",
                requested, static_cast<void*>(results), static_cast<void*>(count));
  const Pref* pref = unwrap<Pref>(preference, kPrefMagic);
  if (!pref) return fail(CUBLAS_STATUS_INVALID_VALUE, "AlgoGetHeuristic: null or destroyed preference");
  Problem p;
  const cublasStatus_t st = check(p, op, A, B, C, D);
  if (st != CUBLAS_STATUS_SUCCESS) return st;
  const Algo algo = choose(*p.op, *pref);
  results[0] = cublasLtMatmulHeuristicResult_t{};  // workspaceSize 0
  std::memcpy(&results[0].algo, &algo, sizeof(algo));
  results[0].state = CUBLAS_STATUS_SUCCESS;
  results[0].wavesCount = 1.0f;
  *count = 1;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmul(cublasLtHandle_t handle, cublasLtMatmulDesc_t op, const void* alpha, const void* A,
                              cublasLtMatrixLayout_t Adesc, const void* B, cublasLtMatrixLayout_t Bdesc,
                              const void* beta, const void* C, cublasLtMatrixLayout_t Cdesc, void* D,
                              cublasLtMatrixLayout_t Ddesc, const cublasLtMatmulAlgo_t* algo, void* workspace,
                              size_t workspace_bytes, cudaStream_t stream) {
  (void)workspace, (void)workspace_bytes;  // the algorithm needs no workspace
  if (!handle_ok(handle)) return fail(CUBLAS_STATUS_NOT_INITIALIZED, "cublasLtMatmul: not a live handle");
  Problem p;
  cublasStatus_t st = check(p, op, Adesc, Bdesc, Cdesc, Ddesc);
  if (st != CUBLAS_STATUS_SUCCESS) return st;
  if (!alpha || !beta) return fail(CUBLAS_STATUS_INVALID_VALUE, "cublasLtMatmul: null alpha or beta");
  Algo chosen = choose(*p.op, Pref{});  // a null algo: the library's own default query
  if (algo) {
    std::memcpy(&chosen, algo, sizeof(chosen));
    if (chosen.magic != kAlgoMagic)
      return fail(CUBLAS_STATUS_INVALID_VALUE, "cublasLtMatmul: the algorithm did not come from the heuristic");
  }
  const float a = *static_cast<const float*>(alpha), b = *static_cast<const float*>(beta);
  const void* const ptr[kOperands] = {A, B, C, D, p.op->bias, p.op->aux};
  st = check_pointers(p, chosen, ptr, b);
  if (st != CUBLAS_STATUS_SUCCESS) return st;
  // Runs with the stream; the descriptors may change or go once this returns, so the product keeps copies.
  auto q = std::make_shared<Queued>(p, a, b, ptr);
  if (simt::enqueue(stream, [q] { run(q->p, q->alpha, q->beta, q->ptr); }) != cudaSuccess)
    return fail(CUBLAS_STATUS_EXECUTION_FAILED, "cublasLtMatmul on a stream that is not live");
  return CUBLAS_STATUS_SUCCESS;
}

}  // extern "C"
