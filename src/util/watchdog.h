// The hang watchdog: a rank that makes no progress for --timeout seconds (a collective whose peer stopped
// without dying, a stuck device, a paused process) ends itself with a message naming the rank, what it
// was waiting in, the step and the unit, and a non-zero exit; the launcher then ends the other ranks. A
// rank that is itself paused cannot report, but every rank waiting for it does, so the job ends within
// about the timeout. Checkpoints stay whole: files are written atomically, so a checkpoint interrupted
// here never gets its manifest and the previous one stays the newest complete one.
//
// Progress is reported by the code that waits: communicators before each collective wait, the FSDP engine
// per unit, the trainer per step. Everything but the check runs on the main thread and costs an atomic store
// and, for a new label, a short locked copy.
#pragma once
#include <cstdint>
#include <string>

namespace gpt::watchdog {

// Starts the checking thread (timeout_s <= 0: no watchdog). Calling it again restarts it.
void start(double timeout_s, int rank);
void stop();
// Progress: what this rank does next (a string literal: "all-gather", "checkpoint write", ...).
void beat(const char* activity);
// Progress, with the context the message names.
void at_step(int64_t step);
void at_unit(const std::string& unit);

}  // namespace gpt::watchdog
