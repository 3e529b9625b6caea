// The timeline trace (--trace FILE): Chrome / Perfetto JSON with one process per rank and one track per
// activity, so the overlap of communication and compute can be seen, not guessed.
//   tracks: "compute" (forward / recompute / backward of each unit), "optimizer", "data", "copies" (host
//   <-> device offload traffic), one track per gather slot ("gather slot k": all-gather start -> finish)
//   and per gradient slot ("reduce slot k": reduce-scatter start -> finish);
//   counters: bytes of gathered parameters / gradient slots in use, and communication bytes in flight.
// Events are B/E pairs buffered in memory; at the end every rank writes a part file and rank 0 merges the
// parts into FILE (a JSON object with "traceEvents"). Recording is a no-op when tracing is off.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace gpt {

class Communicator;

namespace trace {

enum Track : int {
  kCompute = 1,
  kOptimizer = 2,
  kData = 3,
  kCopies = 4,
  kCommStream = 5,  // the simulated machine's streams (gpt memplan --time --trace): what ran when
  kCopyStream = 6,
  kEngineStream = 7,  // the engine's and the optimizer's ops on the simulated compute stream
  kGatherSlot0 = 100,  // + slot index
  kReduceSlot0 = 200,  // + gradient slot index
};

bool on();
// Starts recording for this rank; the file is written by finish(). The trainer checks that the path can be
// written before anything runs (Trainer::check_output_paths), together with --metrics.
void start(const std::string& path, int rank);
void begin(int track, const std::string& name, const char* category);
void end(int track);
void counter(const char* name, double value);
// Every rank writes its events; rank 0 merges them into the trace file. Collective when world > 1.
void finish(Communicator& comm);
// The clock events are stamped with, in microseconds: the simulated machine's (src/sim) while it runs a
// step; an empty function restores the monotonic clock.
void set_clock(std::function<double()> us);
// A finished span at explicit times (the simulated machine's streams).
void span(int track, const std::string& name, const char* category, double t0_us, double t1_us);
// One process's events as the whole file (the simulated step: one rank, no communicator to merge over).
void finish_local();
// Drops everything recorded (tests).
void reset();

// While one lives, recording starts from nothing and the trace that was on (a run's --trace) is set aside
// untouched, restored at destruction: the simulated step (src/sim) records only into a trace of its own.
class Isolated {
 public:
  Isolated();
  ~Isolated();
  Isolated(const Isolated&) = delete;
  Isolated& operator=(const Isolated&) = delete;

 private:
  void* saved_;  // the State set aside (trace.cpp)
};

// begin() on construction, end() on destruction.
class Scope {
 public:
  Scope(int track, const std::string& name, const char* category) : track_(track), live_(on()) {
    if (live_) begin(track, name, category);
  }
  ~Scope() {
    if (live_) end(track_);
  }
  Scope(const Scope&) = delete;
  Scope& operator=(const Scope&) = delete;

 private:
  int track_;
  bool live_;
};

}  // namespace trace
}  // namespace gpt
