// MPI_CHECK: the MPI leg of the project's one error path. Communicators made here set MPI_ERRORS_RETURN,
// so a failing MPI call returns its code instead of aborting; MPI_CHECK turns that code into a gpt::Error
// naming the call, the source line and MPI's own error string.
#pragma once
#ifndef OMPI_SKIP_MPICXX
#define OMPI_SKIP_MPICXX 1  // the C API only: OpenMPI's deprecated C++ bindings warn under -Wextra
#endif
#include <mpi.h>

#include <string>

#include "src/core/check.h"

namespace gpt::detail {

[[noreturn]] inline void mpi_fail(int code, const char* call, const char* file, int line) {
  char text[MPI_MAX_ERROR_STRING] = {0};
  int len = 0;
  std::string what = MPI_Error_string(code, text, &len) == MPI_SUCCESS ? std::string(text, len) : "unknown";
  fail(call, " failed at ", file, ":", line, ": ", what, " (MPI error code ", code, ")");
}

}  // namespace gpt::detail

#define MPI_CHECK(call)                                                                  \
  do {                                                                                   \
    int mpi_check_code_ = (call);                                                        \
    if (mpi_check_code_ != MPI_SUCCESS)                                                  \
      ::gpt::detail::mpi_fail(mpi_check_code_, #call, __FILE__, __LINE__);               \
  } while (0)
