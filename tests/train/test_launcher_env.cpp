// Why: `--comm auto` decides from the environment whether a process was started by an MPI launcher, and a
// launcher it misses makes every rank train alone, silently. These tests set each launcher's variables as
// that launcher documents them and check what launcher_world_size reads.
#include <gtest/gtest.h>

#include <cstdlib>
#include <map>
#include <optional>
#include <string>

#include "src/dist/comm_world.h"

namespace gpt {
namespace {

// Sets the launcher variables for one test and puts the process's own values back afterwards.
class LauncherEnv : public ::testing::Test {
 protected:
  static constexpr const char* kNames[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK", "SLURM_STEP_NUM_TASKS"};

  void SetUp() override {
    for (const char* n : kNames) {
      const char* v = std::getenv(n);
      saved_[n] = v ? std::optional<std::string>(v) : std::nullopt;
      unsetenv(n);
    }
  }
  void TearDown() override {
    for (const auto& [n, v] : saved_) {
      if (v) setenv(n.c_str(), v->c_str(), 1);
      else unsetenv(n.c_str());
    }
  }
  static void set(const char* name, const char* value) { setenv(name, value, 1); }

 private:
  std::map<std::string, std::optional<std::string>> saved_;
};

TEST_F(LauncherEnv, NoLauncherIsZero) { EXPECT_EQ(launcher_world_size(), 0); }

TEST_F(LauncherEnv, OpenMpiAndPmiGiveTheirSize) {
  set("PMI_SIZE", "3");
  EXPECT_EQ(launcher_world_size(), 3);  // MPICH's Hydra
  set("OMPI_COMM_WORLD_SIZE", "4");
  set("PMIX_RANK", "0");  // OpenMPI's mpirun sets both; its size wins
  EXPECT_EQ(launcher_world_size(), 4);
}

TEST_F(LauncherEnv, PmixLauncherCountsAsLaunched) {
  set("PMIX_RANK", "0");  // rank 0: present, though its value reads as 0
  set("SLURM_STEP_NUM_TASKS", "16");  // srun --mpi=pmix -n 16
  EXPECT_EQ(launcher_world_size(), 16);
}

// Every task of a Slurm step and all it starts inherit PMIX_RANK, MPI or not (a shell from srun --pty, a
// driver script starting several gpt): a one-task step, or none named, is no launch.
TEST_F(LauncherEnv, InheritedPmixRankAloneIsNotALaunch) {
  set("PMIX_RANK", "0");
  EXPECT_EQ(launcher_world_size(), 0);
  set("SLURM_STEP_NUM_TASKS", "1");
  EXPECT_EQ(launcher_world_size(), 0);
}

TEST_F(LauncherEnv, SlurmAloneIsNotALaunch) {
  set("SLURM_STEP_NUM_TASKS", "16");  // Slurm's variables alone (srun without PMIx) are no MPI launch
  EXPECT_EQ(launcher_world_size(), 0);
}

}  // namespace
}  // namespace gpt
