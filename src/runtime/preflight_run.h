// The pre-flight of a command that builds a model, run before its big allocations (plan/preflight.h has
// the arithmetic): the run's memory plan (the same code as `gpt memplan`) is printed and flushed on rank 0,
// so even a run that dies later leaves a trace of what it attempted, then set against this node's host
// memory (util/host_memory.h, shared by the ranks of the node) and this rank's free device memory. A run
// that cannot fit stops on every rank at once, each with the same one-line verdict, before anything large
// is allocated.
#pragma once
#include <cstdint>
#include <string>

#include "src/backend/backend.h"
#include "src/dist/communicator.h"
#include "src/plan/memplan.h"

namespace gpt {

// Collective over `world`. `what` names the command in messages. With `report` rank 0 prints the plan line
// first; with skip (--no-preflight) nothing is checked.
void preflight(Communicator& world, const Backend& backend, const MemPlanInput& run, const std::string& what, bool skip,
               bool report);

// For a command that holds a whole model on the host (export): `bytes` per rank against the host.
void preflight_host_bytes(Communicator& world, int64_t bytes, const std::string& what, bool skip);

}  // namespace gpt
