// `gpt train`: parse the flags, create --out, and hand over to the Trainer.
#include <cstdio>
#include <filesystem>
#include <memory>

#include "src/cli/abort_peers.h"
#include "src/cli/commands.h"
#include "src/cli/plan_auto.h"
#include "src/cli/train_flags.h"
#include "src/core/check.h"
#include "src/dist/collective_check.h"
#include "src/io/run_lock.h"
#include "src/train/trainer.h"
#include "src/util/watchdog.h"

namespace gpt {

int cmd_train(int argc, char** argv, Communicator& world) {
  Flags f("train", argc, argv, kTrainSwitches);
  if (f.help()) {
    std::printf("usage: gpt train --train GLOB [--val GLOB] [flags]\n"
                "Trains a GPT-2 model; launch with mpirun -n N for N ranks.\n%s%s",
                kModelFlagsHelp, kTrainFlagsHelp);
    return 0;
  }
  TrainOptions o = parse_train_flags(f, "d6");
  f.required("--train");
  const bool plan = plan_auto_requested(f);
  f.finish();
  // The watchdog covers start-up (collectives, loading a checkpoint) as well as the steps.
  watchdog::start(o.timeout_s, world.rank());
  std::unique_ptr<RunLock> lock;  // one run per --out (held by rank 0 until the process ends)
  if (!o.out_dir.empty()) {
    collective_check(world, "--out", [&] {
      std::error_code ec;
      std::filesystem::create_directories(o.out_dir, ec);
      GPT_CHECK(!ec, "--out: cannot create ", o.out_dir, ": ", ec.message());
      if (world.rank() == 0) lock = std::make_unique<RunLock>(o.out_dir);
    });
  }
  if (plan) apply_plan_auto(f, o, world);
  std::unique_ptr<Trainer> t;  // held here: a rank failing with peers aborts the job before it is destroyed
  run_or_abort_peers(world, [&] {
    t = std::make_unique<Trainer>(o, world);
    t->run();
  });
  watchdog::stop();
  return 0;
}

}  // namespace gpt
