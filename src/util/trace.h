// The timeline trace (--trace FILE): Chrome / Perfetto JSON with one process per rank and one track per
// activity, so the overlap of communication and compute can be seen, not guessed.
//   tracks: "compute" (forward / recompute / backward of each unit), "optimizer", "data", "copies h2d" and
//   "copies d2h" (host <-> device offload traffic), one track per gather slot ("gather slot k": all-gather
//   start -> finish) and per gradient slot ("reduce slot k": reduce-scatter start -> finish), and "tp
//   collectives" (tensor parallelism's, inside the compute they interrupt);
//   counters: bytes of gathered parameters / gradient slots in use, and communication bytes in flight.
// Events are B/E pairs buffered in memory; at the end every rank writes a part file and rank 0 merges the
// parts into FILE (a JSON object with "traceEvents"). Recording is a no-op when tracing is off.
//
// Device time. A GPU's streams run after the host queued their work, so a host timestamp says when work was
// queued, not when it ran. A track bound to a StreamClock (bind_clock: the cuda backend binds "compute" to its
// compute stream and the two copy tracks to its copy streams, the NCCL communicator "comm stream" to its
// stream) takes the times of its begin and end from marks in that stream's order; resolve() reads them once the
// streams passed them (the trainer calls it after each step's host synchronisation) and places them on the
// trace's clock. On the cpu backend nothing is bound: its ops run on the host, so host time is device time.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace gpt {

class Communicator;

namespace trace {

// A stream's clock: marks in its order, and their device times once the stream has passed them.
class StreamClock {
 public:
  virtual ~StreamClock() = default;
  // A point in the stream's order after the work queued on it so far.
  virtual uint64_t mark() = 0;
  // The mark's time in microseconds on the trace's clock (the host's monotonic clock, to which the device's is
  // aligned once), or a negative value while the stream has not passed it. A mark whose time was given is
  // spent (the clock may reuse what held it).
  virtual double take_time_us(uint64_t mark) = 0;
};

enum Track : int {
  kCompute = 1,
  kOptimizer = 2,
  kData = 3,
  kCopies = 4,
  kCommStream = 5,  // the collectives as their stream ran them (NCCL's stream; the simulated machine's)
  kCopyStream = 6,  // the simulated machine's copy stream (gpt memplan --time --trace)
  kEngineStream = 7,  // the engine's and the optimizer's ops on the simulated compute stream
  kCopiesD2H = 8,     // device -> host copies ("copies d2h"; kCopies is "copies h2d")
  kCopyStreamD2H = 9, // the simulated machine's device -> host copy stream
  kTpComm = 10,       // the tensor-parallel group's collectives, issued by the model (start -> wait; host time)
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

// Device time (see the top). bind_clock(track, null) makes the track host-timed again; unbind_clock drops a
// clock from every track it is bound to (its owner's destructor). resolve() places every mark whose stream has
// passed it; finish() resolves what is left after the caller's last synchronisation.
void bind_clock(int track, StreamClock* clock);
void unbind_clock(StreamClock* clock);
void resolve();
// Whether the engine records its gather and reduce slot tracks (host time from a collective's start to its
// wait): not once the comm stream's own track is device-timed (GPU ranks), which shows the same collectives as
// they ran.
bool slot_tracks_on();

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
  // Named "<prefix><index>" ("forward block3"), the name built only while recording (the simulated step runs
  // these per layer thousands of times in a plan search).
  Scope(int track, const char* prefix, int index, const char* category) : track_(track), live_(on()) {
    if (live_) begin(track, prefix + std::to_string(index), category);
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
