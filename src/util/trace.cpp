// See trace.h. Timestamps are microseconds of the monotonic clock, which all ranks on one machine share.
#include "src/util/trace.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <functional>
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
  double ts;
  double value;
  std::string name;
  const char* cat;
};

struct State {
  bool on = false;
  int rank = 0;
  std::string path;
  std::vector<Event> events;
  std::map<int, std::string> track_names;
};
State& st() {
  static State s;
  return s;
}

std::function<double()>& clock_override() {
  static std::function<double()> c;
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
  if (t == kCopies) return "copies";
  if (t == kCommStream) return "comm stream (simulated)";
  if (t == kCopyStream) return "copy stream (simulated)";
  if (t == kEngineStream) return "engine ops (simulated compute stream)";
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
    o << ",\n{\"ph\":\"" << e.ph << "\",\"pid\":" << s.rank << ",\"tid\":" << e.track << ",\"ts\":" << e.ts;
    if (e.ph == 'B') o << ",\"name\":" << json_quote(e.name) << ",\"cat\":\"" << e.cat << "\"";
    if (e.ph == 'C') o << ",\"name\":" << json_quote(e.name) << ",\"args\":{\"bytes\":" << e.value << "}";
    o << "}";
  }
  return o.str();
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
}

void begin(int track, const std::string& name, const char* category) {
  State& s = st();
  if (!s.on) return;
  if (!s.track_names.count(track)) s.track_names[track] = track_name(track);
  s.events.push_back({'B', track, now_us(), 0, name, category});
}

void end(int track) {
  State& s = st();
  if (!s.on) return;
  s.events.push_back({'E', track, now_us(), 0, "", ""});
}

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
  const std::string all = "{\"displayTimeUnit\":\"ms\",\"traceEvents\":[\n" + rank_json() + "\n]}\n";
  write_file_atomic(s.path, all.data(), all.size());
  reset();
}

void finish(Communicator& comm) {
  State& s = st();
  if (!s.on) return;
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
}

}  // namespace gpt::trace
