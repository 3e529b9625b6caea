// NCCL in the SIMT emulator build: not emulated. The NCCL communicator (src/dist/comm_nccl.cu) is compiled
// and linked like the rest of the CUDA sources, but every NCCL call fails with ncclInvalidUsage and says
// why, so a multi-rank CUDA run under the emulator stops at its first collective with a clear error.
#include <nccl.h>

namespace {
constexpr const char* kWhy = "NCCL is not emulated in the SIMT build (single-rank CUDA runs only)";
ncclResult_t no() { return ncclInvalidUsage; }
}  // namespace

const char* ncclGetErrorString(ncclResult_t) { return kWhy; }
const char* ncclGetLastError(ncclComm_t) { return kWhy; }
ncclResult_t ncclGetUniqueId(ncclUniqueId*) { return no(); }
ncclResult_t ncclCommInitRank(ncclComm_t*, int, ncclUniqueId, int) { return no(); }
ncclResult_t ncclCommSplit(ncclComm_t, int, int, ncclComm_t*, ncclConfig_t*) { return no(); }
ncclResult_t ncclCommDestroy(ncclComm_t) { return no(); }
ncclResult_t ncclCommAbort(ncclComm_t) { return no(); }
ncclResult_t ncclCommGetAsyncError(ncclComm_t, ncclResult_t*) { return no(); }
ncclResult_t ncclCommUserRank(const ncclComm_t, int*) { return no(); }
ncclResult_t ncclCommCount(const ncclComm_t, int*) { return no(); }
ncclResult_t ncclAllGather(const void*, void*, size_t, ncclDataType_t, ncclComm_t, cudaStream_t) { return no(); }
ncclResult_t ncclReduceScatter(const void*, void*, size_t, ncclDataType_t, ncclRedOp_t, ncclComm_t, cudaStream_t) {
  return no();
}
ncclResult_t ncclAllReduce(const void*, void*, size_t, ncclDataType_t, ncclRedOp_t, ncclComm_t, cudaStream_t) {
  return no();
}
ncclResult_t ncclBroadcast(const void*, void*, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t) { return no(); }
