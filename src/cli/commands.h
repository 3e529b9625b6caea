// The subcommands of `gpt`. Each takes the arguments after its name and returns the exit code;
// errors are thrown as gpt::Error and printed by main().
#pragma once
#include "src/dist/communicator.h"

namespace gpt {

int cmd_train(int argc, char** argv, Communicator& world);
int cmd_bench(int argc, char** argv, Communicator& world);
int cmd_eval(int argc, char** argv, Communicator& world);
int cmd_sample(int argc, char** argv, Communicator& world);
int cmd_tokenize(int argc, char** argv, Communicator& world);
int cmd_export(int argc, char** argv, Communicator& world);
int cmd_import(int argc, char** argv, Communicator& world);
int cmd_memplan(int argc, char** argv, Communicator& world);
int cmd_plan(int argc, char** argv, Communicator& world);

}  // namespace gpt
