// gpt: one binary, several subcommands. main() only dispatches and owns the single error exit: a
// gpt::Error anywhere becomes "error: <one line>" and exit code 1; under MPI the other ranks are stopped
// too, so no rank is left hanging in a collective.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string>

#include "src/cli/commands.h"
#include "src/core/check.h"
#include "src/dist/communicator.h"

namespace {

const char* kUsage =
    "usage: gpt <command> [flags]   (gpt <command> --help for its flags)\n"
    "  train     train a GPT-2 model (mpirun -n N gpt train ... for N ranks)\n"
    "  eval      validation loss of a model file\n"
    "  sample    generate text from a model file\n"
    "  tokenize  turn text into llm.c token shards (byte or GPT-2 BPE)\n"
    "  bench     time training steps: ms/step, tokens/s, MFU\n"
    "  export    a checkpoint or model file as an llm.c model file or Hugging Face safetensors\n"
    "  import    Hugging Face GPT-2 weights (model.safetensors) into an llm.c model file\n"
    "  memplan   predict per-rank memory of a run (and ZeRO's Table 1) before launching it\n"
    "  plan      the fastest configurations that fit a model, ranks and memory budget, predicted\n";

}  // namespace

// OpenMP threads that spin while they wait turn a busy machine (another process on one of the cores)
// into a 2-3x slowdown of every parallel region; passive waiting costs little when the machine is idle.
// libgomp reads OMP_WAIT_POLICY when it loads, before main(), so the process re-executes itself once with
// the variable set. A value the user set is kept.
static void prefer_passive_openmp_waits(char** argv) {
  if (std::getenv("OMP_WAIT_POLICY")) return;
  setenv("OMP_WAIT_POLICY", "PASSIVE", 1);
  execv("/proc/self/exe", argv);  // returns only on failure: then run with the default policy
}

int main(int argc, char** argv) {
  prefer_passive_openmp_waits(argv);
  if (argc < 2 || !std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "-h")) {
    std::fputs(kUsage, argc < 2 ? stderr : stdout);
    return argc < 2 ? 2 : 0;
  }
  const std::string cmd = argv[1];
  std::unique_ptr<gpt::Communicator> world;
  int rc = 1;
  try {
    world = gpt::make_world_communicator("auto");
    int n = argc - 2;
    char** a = argv + 2;
    if (cmd == "train") rc = gpt::cmd_train(n, a, *world);
    else if (cmd == "bench") rc = gpt::cmd_bench(n, a, *world);
    else if (cmd == "eval") rc = gpt::cmd_eval(n, a, *world);
    else if (cmd == "sample") rc = gpt::cmd_sample(n, a, *world);
    else if (cmd == "tokenize") rc = gpt::cmd_tokenize(n, a, *world);
    else if (cmd == "export") rc = gpt::cmd_export(n, a, *world);
    else if (cmd == "import") rc = gpt::cmd_import(n, a, *world);
    else if (cmd == "memplan") rc = gpt::cmd_memplan(n, a, *world);
    else if (cmd == "plan") rc = gpt::cmd_plan(n, a, *world);
    else gpt::fail("unknown command '", cmd, "' (commands: train eval sample tokenize bench export import memplan plan; see gpt --help)");
  } catch (const gpt::Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    std::fflush(stderr);
    if (world && world->world() > 1) world->abort(1);
    return 1;
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "error: %s: out of host memory (an allocation outside the memory ledger failed; gpt memplan "
                         "shows what a run needs)\n", cmd.c_str());
    std::fflush(stderr);
    if (world && world->world() > 1) world->abort(1);
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s: %s\n", cmd.c_str(), e.what());
    if (world && world->world() > 1) world->abort(1);
    return 1;
  }
  world.reset();
  gpt::finalize_communication();
  return rc;
}
