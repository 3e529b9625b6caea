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
//
// Waiting on a device. A GPU's collectives never block the host, neither when they are issued nor when they are
// waited for (the compute stream waits), so a collective whose peer stopped shows only where the host next
// waits for the device. Those waits poll (wait_until): while the device has not passed the point, each
// registered hang source checks for asynchronous errors (NCCL's); when the rank has made no progress for the
// timeout, the oldest work in flight over every source names it ("the all-gather of blocks3"), every source aborts
// what it has in flight (ncclCommAbort), and the rank ends with one message naming the rank, that work, the
// step and the unit. While a rank polls, the checking thread leaves the report to the poll (it steps in only
// kGraceS later, should the poll itself be stuck in a driver call). Without a watchdog (--timeout 0) the
// waits poll without a deadline.
#pragma once
#include <cstdint>
#include <functional>
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

// What a device wait asks of the code that put work in flight (the NCCL communicator).
struct InFlight {
  uint64_t order = 0;  // when it was issued, in one order over every source (what ran first hangs first)
  std::string what;    // "the all-gather of blocks3 (2 ranks)"; empty: nothing in flight
};
struct HangSource {
  std::function<void()> check;           // throws gpt::Error for an asynchronous error of its work
  std::function<InFlight()> in_flight;   // its oldest unfinished work
  std::function<void()> abort;           // drops its work in flight without waiting for peers
};
// The next issue order for InFlight::order.
uint64_t next_issue_order();
int add_hang_source(HangSource source);  // an id for remove_hang_source
void remove_hang_source(int id);
// Polls `done` until it returns true, as described above. `what` names the wait ("a device synchronisation").
void wait_until(const char* what, const std::function<bool()>& done);
// Seconds the checking thread waits past the timeout while a poll is in progress.
constexpr double kGraceS = 10;

}  // namespace gpt::watchdog
