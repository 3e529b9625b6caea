// See trace.h. Timestamps are microseconds of the monotonic clock, which all ranks on one machine share.
#include "src/util/trace.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <iterator>
#include <map>
#include <sstream>

#include "src/core/check.h"
#include "src/dist/communicator.h"
#include "src/io/atomic_file.h"
#include "src/io/json_min.h"

namespace gpt::trace {
namespace {

struct Event {
  char ph;  // 'B', 'E', 'C'
  int track;
  double ts;  // microseconds on the trace's clock (once resolved, for a device-timed event)
  double value;
  std::string name;
  const char* cat;
  StreamClock* clock = nullptr;  // a device-timed event whose time is not read yet: its stream's clock
  uint64_t mark = 0;             // and its mark there
};

struct State {
  bool on = false;
  int rank = 0;
  std::string path;
  std::vector<Event> events;
  std::map<int, std::string> track_names;
  std::map<int, StreamClock*> clocks;  // device-timed tracks (kept across start and reset: their owners bind them)
  size_t resolved = 0;                 // events before this index hold their times
};
// Per thread: a rank records from its one thread, and `gpt plan` prices candidates on several, each of whose
// simulated steps sets its own clock and isolates its own (empty) trace.
State& st() {
  thread_local State s;
  return s;
}

std::function<double()>& clock_override() {
  thread_local std::function<double()> c;
  return c;
}

double now_us() {
  if (clock_override()) return clock_override()();
  using namespace std::chrono;
  return duration<double, std::micro>(steady_clock::now().time_since_epoch()).count();
}

std::string track_name(int t) {
  if (t == kCompute) return "compute";
  if (t == kOptimizer) return "optimizer";
  if (t == kData) return "data";
  if (t == kCopies) return "copies h2d";
  if (t == kCommStream) return "comm stream";
  if (t == kCopyStream) return "copy stream h2d (simulated)";
  if (t == kCopyStreamD2H) return "copy stream d2h (simulated)";
  if (t == kCopiesD2H) return "copies d2h";
  if (t == kEngineStream) return "engine ops (simulated compute stream)";
  if (t == kTpComm) return "tp collectives";
  if (t >= kReduceSlot0) return "reduce slot " + std::to_string(t - kReduceSlot0);
  if (t >= kGatherSlot0) return "gather slot " + std::to_string(t - kGatherSlot0);
  return "track " + std::to_string(t);
}

// This rank's events as JSON objects, comma-separated, with metadata names first.
std::string rank_json() {
  State& s = st();
  std::ostringstream o;
  o.precision(3);
  o << std::fixed;
  o << "{\"ph\":\"M\",\"pid\":" << s.rank << ",\"name\":\"process_name\",\"args\":{\"name\":\"rank " << s.rank << "\"}}";
  o << ",\n{\"ph\":\"M\",\"pid\":" << s.rank << ",\"name\":\"process_sort_index\",\"args\":{\"sort_index\":" << s.rank << "}}";
  for (auto& kv : s.track_names)
    o << ",\n{\"ph\":\"M\",\"pid\":" << s.rank << ",\"tid\":" << kv.first
      << ",\"name\":\"thread_name\",\"args\":{\"name\":" << json_quote(kv.second) << "}}";
  for (const Event& e : s.events) {
    if (e.clock || e.ph == 'X') continue;  // a device time never read, or dropped with its clock
    o << ",\n{\"ph\":\"" << e.ph << "\",\"pid\":" << s.rank << ",\"tid\":" << e.track << ",\"ts\":" << e.ts;
    if (e.ph == 'B') o << ",\"name\":" << json_quote(e.name) << ",\"cat\":\"" << e.cat << "\"";
    if (e.ph == 'C') o << ",\"name\":" << json_quote(e.name) << ",\"args\":{\"bytes\":" << e.value << "}";
    o << "}";
  }
  return o.str();
}

// A begin or end on `track`: stamped now on the host's clock, or marked in its stream's order.
void stamp(char ph, int track, const std::string& name, const char* category) {
  State& s = st();
  if (!s.on) return;
  if (!s.track_names.count(track)) s.track_names[track] = track_name(track);
  auto c = s.clocks.find(track);
  if (c == s.clocks.end()) {
    s.events.push_back({ph, track, now_us(), 0, name, category});
  } else {
    s.events.push_back({ph, track, 0, 0, name, category, c->second, c->second->mark()});
  }
}

}  // namespace

bool on() { return st().on; }

void start(const std::string& path, int rank) {
  State& s = st();
  s.on = true;
  s.rank = rank;
  s.path = path;
  s.events.clear();
  s.events.reserve(1 << 16);
  s.resolved = 0;
}

void begin(int track, const std::string& name, const char* category) { stamp('B', track, name, category); }
void end(int track) { stamp('E', track, "", ""); }

void counter(const char* name, double value) {
  State& s = st();
  if (!s.on) return;
  s.events.push_back({'C', 0, now_us(), value, name, ""});
}

Isolated::Isolated() : saved_(new State(std::move(st()))) {
  st() = State{};
}

Isolated::~Isolated() {
  st() = std::move(*static_cast<State*>(saved_));
  delete static_cast<State*>(saved_);
}

void set_clock(std::function<double()> us) { clock_override() = std::move(us); }

void span(int track, const std::string& name, const char* category, double t0_us, double t1_us) {
  State& s = st();
  if (!s.on) return;
  s.track_names.emplace(track, track_name(track));
  s.events.push_back({'B', track, t0_us, 0, name, category});
  s.events.push_back({'E', track, t1_us, 0, "", ""});
}

void finish_local() {
  State& s = st();
  if (!s.on) return;
  resolve();
  const std::string all = "{\"displayTimeUnit\":\"ms\",\"traceEvents\":[\n" + rank_json() + "\n]}\n";
  write_file_atomic(s.path, all.data(), all.size());
  reset();
}

void finish(Communicator& comm) {
  State& s = st();
  if (!s.on) return;
  resolve();
  const std::string part = s.path + ".rank" + std::to_string(comm.rank());
  const std::string mine = rank_json();
  write_file_atomic(part, mine.data(), mine.size());
  if (comm.world() > 1) comm.barrier();
  if (comm.rank() == 0) {
    std::string all = "{\"displayTimeUnit\":\"ms\",\"traceEvents\":[\n";
    for (int r = 0; r < comm.world(); r++) {
      const std::string p = s.path + ".rank" + std::to_string(r);
      all += (r ? ",\n" : "") + read_file(p);
      std::filesystem::remove(p);
    }
    all += "\n]}\n";
    write_file_atomic(s.path, all.data(), all.size());
  }
  if (comm.world() > 1) comm.barrier();
  reset();
}

void reset() {
  State& s = st();
  s.on = false;
  s.events.clear();
  s.track_names.clear();
  s.resolved = 0;
}

void bind_clock(int track, StreamClock* clock) {
  if (clock)
    st().clocks[track] = clock;
  else
    st().clocks.erase(track);
}

// Marks already taken keep their clock: they are read (or dropped) before the owner goes, since it resolves
// nothing after this; events still pending on it are dropped here.
void unbind_clock(StreamClock* clock) {
  State& s = st();
  for (auto it = s.clocks.begin(); it != s.clocks.end();)
    it = it->second == clock ? s.clocks.erase(it) : std::next(it);
  for (Event& e : s.events)
    if (e.clock == clock) e.clock = nullptr, e.ph = 'X';  // never written (rank_json skips 'X')
}

bool slot_tracks_on() { return st().clocks.count(kCommStream) == 0; }

// Events are read in order; each stream passes its marks in order, so the first unread mark of a stream ends
// what can be read of it now. Events of other streams after it are still read.
void resolve() {
  State& s = st();
  size_t first_pending = s.events.size();
  std::map<StreamClock*, bool> blocked;
  for (size_t i = s.resolved; i < s.events.size(); i++) {
    Event& e = s.events[i];
    if (!e.clock) continue;
    if (!blocked[e.clock]) {
      const double t = e.clock->take_time_us(e.mark);
      if (t >= 0) {
        e.ts = t;
        e.clock = nullptr;
        continue;
      }
      blocked[e.clock] = true;
    }
    first_pending = std::min(first_pending, i);
  }
  s.resolved = first_pending;
}

}  // namespace gpt::trace
