// NCCL_CHECK: the NCCL leg of the project's one error path. Every ncclResult_t other than ncclSuccess (and
// ncclInProgress, which only non-blocking communicators return) becomes a gpt::Error naming the call, the
// source line, NCCL's error string and NCCL's own last-error text, which usually says what to fix.
#pragma once
#include <nccl.h>

#include "src/core/check.h"

namespace gpt::detail {

[[noreturn]] inline void nccl_fail(ncclResult_t code, const char* call, const char* file, int line) {
  const char* last = ncclGetLastError(nullptr);  // the argument is unused by NCCL
  fail(call, " failed at ", file, ":", line, ": ", ncclGetErrorString(code), " (NCCL error code ",
       static_cast<int>(code), ")", last && *last ? ": " : "", last ? last : "");
}

}  // namespace gpt::detail

#define NCCL_CHECK(call)                                                                       \
  do {                                                                                         \
    ncclResult_t nccl_check_code_ = (call);                                                    \
    if (nccl_check_code_ != ncclSuccess && nccl_check_code_ != ncclInProgress)                 \
      ::gpt::detail::nccl_fail(nccl_check_code_, #call, __FILE__, __LINE__);                   \
  } while (0)
