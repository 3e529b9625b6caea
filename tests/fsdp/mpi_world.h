// The world communicator of a test_fsdp run, made once by mpi_main.cpp ("mpi" under mpiexec, "single" when
// the binary is started alone). Every rank runs every test, so a test may call collectives on it freely;
// between two collectives use EXPECT_* (never ASSERT_*), or a failing rank would leave the others waiting.
#pragma once
#include <filesystem>
#include <string>

#include "src/dist/communicator.h"

namespace gpt::test {
Communicator& world();

// A fresh directory every rank of the job agrees on (rank 0 empties it; the others wait for it).
inline std::string shared_dir(const std::string& name) {
  Communicator& w = world();
  const std::string dir =
      (std::filesystem::temp_directory_path() / ("gpt_fsdp_" + name + "_np" + std::to_string(w.world()))).string();
  if (w.rank() == 0) {
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir);
  }
  w.barrier();
  return dir;
}
}  // namespace gpt::test
