// A rank whose run fails with peers ends the job at once, before its stack unwinds. Unwinding frees device
// buffers, and a free first waits for the work queued before it: on GPU ranks that work includes collectives
// the peers will never join, so the rank would wait out --timeout, and the watchdog's hang message would
// replace the real error. One rank unwinds as usual, and main() prints the error after it.
#pragma once
#include <cstdio>

#include "src/core/check.h"
#include "src/dist/communicator.h"

namespace gpt {

// Runs fn; on a gpt::Error with world > 1, prints it as main() does ("error: ...") and aborts the job (other
// exceptions reach main, whose messages for them are its own). What must not be destroyed first (the Trainer)
// is held by the caller, outside fn: fn's own locals unwind before this catch.
template <typename Fn>
void run_or_abort_peers(Communicator& world, Fn&& fn) {
  try {
    fn();
  } catch (const Error& e) {
    if (world.world() == 1) throw;
    std::fprintf(stderr, "error: %s\n", e.what());
    std::fflush(stderr);
    world.abort(1);
    throw;  // abort does not return; for the compiler
  }
}

}  // namespace gpt
