// The world communicator of a test_fsdp run, made once by mpi_main.cpp ("mpi" under mpiexec, "single" when
// the binary is started alone). Every rank runs every test, so a test may call collectives on it freely;
// between two collectives use EXPECT_* (never ASSERT_*), or a failing rank would leave the others waiting.
#pragma once
#include "src/dist/communicator.h"

namespace gpt::test {
Communicator& world();
}  // namespace gpt::test
