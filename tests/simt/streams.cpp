// See streams.h: each created stream is a queue of work items and waits; an event is the point of a queue
// its last record marked. Running a queue up to a point runs, first, the queues its waits name up to theirs.
// Waits cannot form a cycle: a wait names a point that was already queued when the wait was.
#include "tests/simt/streams.h"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "tests/simt/state.h"

namespace simt {
namespace {

struct Queue;
struct Item {
  Work work;                        // what runs; or work that completes later:
  std::function<Poll()> start;      // starts it, returning the poll it is done by
  Poll poll;                        // (once started)
  double cost = 0;                  // its device time (us)
  std::shared_ptr<Queue> wait_for;  // or a wait: run this queue first,
  uint64_t wait_until = 0;          // up to its first wait_until items
};
struct Queue {
  bool blocking = true;  // the legacy default stream waits for it (cudaStreamNonBlocking clears it)
  uint64_t created = 0;  // creation order, for the order a device-wide finish takes
  std::deque<Item> items;
  uint64_t issued = 0, done = 0;  // items queued and items run
  bool running = false;           // inside run_until: its own work must not synchronise it
  double clock = 0;               // device time (us) when its last item ended
  std::vector<double> at{0.0};    // [k]: device time after its first k items
};
// An event: the queue and point of its last record (no queue: nothing to wait for, at device time `time`).
struct Mark {
  std::shared_ptr<Queue> queue;
  uint64_t until = 0;
  double time = 0;
  bool timing = true;  // made without cudaEventDisableTiming
};



constexpr int kIssue = -2, kRotate = -1;  // schedules besides a pinned phase k >= 0

// GPT_SIMT_STREAMS (see streams.h): kIssue, kRotate, or the pinned phase.
int schedule_from_env() {
  const char* v = std::getenv("GPT_SIMT_STREAMS");
  if (!v || std::strcmp(v, "phases") == 0) return kRotate;
  if (std::strcmp(v, "issue") == 0) return kIssue;
  if (std::strcmp(v, "lazy") == 0) return 0;
  char* end = nullptr;
  const long k = std::strncmp(v, "eager:", 6) == 0 ? std::strtol(v + 6, &end, 10) : 0;
  if (end && end != v + 6 && *end == '\0' && k >= 1 && k <= 64) return static_cast<int>(k);
  std::fprintf(stderr, "error: GPT_SIMT_STREAMS=%s: expected phases, issue, lazy or eager:K (K from 1 to 64)\n", v);
  std::exit(2);
}

struct Registry {
  std::recursive_mutex mu;
  std::map<cudaStream_t, std::shared_ptr<Queue>> streams;
  std::map<cudaEvent_t, Mark> events;
  uint64_t created = 0;
  uintptr_t handles = 0;               // handles handed out: each one new, never a destroyed one's
  unsigned finishes = 0;               // device-wide finishes so far: their parity picks the order
  uint64_t syncs = 0;                  // host synchronisations so far: they pick the phase
  int schedule = schedule_from_env();  // kIssue, kRotate or a pinned phase
  double legacy_clock = 0;             // device time of the legacy stream's last work
};
Registry& reg() {
  static Registry r;
  return r;
}

cudaError_t bad_handle(const char* what) {
  state().set_error(cudaErrorInvalidResourceHandle, std::string("SIMT emulator: ") + what);
  return cudaErrorInvalidResourceHandle;
}

// Runs q's items until `until` have run, and returns true; or, with block false, stops at work in progress
// that is not done yet and returns false. An item that throws still counts as run; an item that would
// synchronise its own stream (it would wait for itself: a hang on a GPU) stops the program.
bool run_until(Queue& q, uint64_t until, bool block = true) {
  if (q.running && q.done < until) {
    std::fprintf(stderr, "SIMT emulator: work on a stream waits for that same stream's later work\n");
    std::abort();
  }
  struct Running {
    Queue& q;
    explicit Running(Queue& queue) : q(queue) { q.running = true; }
    ~Running() { q.running = false; }
  } running(q);
  while (q.done < until) {
    Item& front = q.items.front();
    if (front.wait_for) {
      if (!run_until(*front.wait_for, front.wait_until, block)) return false;
      q.clock = std::max(q.clock, front.wait_for->at[front.wait_until]);
    } else if (front.start) {
      if (!front.poll) front.poll = front.start();
      while (!front.poll()) {
        if (!block) return false;
        std::this_thread::yield();
      }
      q.clock += front.cost;
    } else {
      Item item = std::move(front);
      q.items.pop_front();
      q.done++;  // counted first, so that a throwing item leaves the queue consistent
      q.clock += item.cost;
      q.at.push_back(q.clock);
      item.work();
      continue;
    }
    q.items.pop_front();
    q.done++;
    q.at.push_back(q.clock);
  }
  return true;
}

// Every stream's queued work (only the blocking streams' for the legacy default stream), stream after
// stream, first created first or last created first on alternate calls.
void finish(bool blocking_only) {
  Registry& r = reg();
  std::vector<std::shared_ptr<Queue>> qs;
  for (auto& [handle, q] : r.streams)
    if (q->blocking || !blocking_only) qs.push_back(q);
  std::sort(qs.begin(), qs.end(), [](const auto& a, const auto& b) { return a->created < b->created; });
  if (r.finishes++ & 1) std::reverse(qs.begin(), qs.end());
  for (auto& q : qs) run_until(*q, q->issued);
}

// The phase now: pinned, or after the n-th host synchronisation a hash of n (splitmix64's finaliser) modulo
// the live streams + 1, so that no pattern of synchronisations in a program (a training step's) lines up
// with the phases and meets every step in the same one.
unsigned phase_now() {
  Registry& r = reg();
  const uint64_t phases = r.streams.size() + 1;
  if (r.schedule >= 0) return static_cast<unsigned>(r.schedule);
  uint64_t x = r.syncs + 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return static_cast<unsigned>((x ^ (x >> 31)) % phases);
}

// Whether work queued on q now runs at once (pulling what it waits for) instead of when it is needed:
// always in issue order; in phase k >= 1 for the k-th stream in creation order among the live ones.
bool eager(const Queue& q) {
  Registry& r = reg();
  if (r.schedule == kIssue) return true;
  const unsigned m = phase_now();
  if (m == 0) return false;
  unsigned rank = 0;  // q's place in creation order among the live streams
  for (auto& [handle, other] : r.streams) rank += other->created < q.created;
  return rank == m - 1;
}

// A host synchronisation ends a phase.
void next_phase() { reg().syncs++; }

std::shared_ptr<Queue> find(cudaStream_t s) {
  auto it = reg().streams.find(s);
  return it == reg().streams.end() ? nullptr : it->second;
}

// Queues an item on q; it runs at once when q is eager now.
void push(Queue& q, Item item) {
  q.items.push_back(std::move(item));
  q.issued++;
  if (eager(q)) run_until(q, q.issued, false);  // as far as it goes without waiting for work in progress
}

// Queues an item lasting cost_us on the live stream s.
cudaError_t push_to(cudaStream_t s, Item item, double cost_us) {
  auto q = find(s);
  if (!q) return bad_handle("work queued on a stream that is not live");
  item.cost = cost_us;
  push(*q, std::move(item));
  return cudaSuccess;
}

// The legacy stream's device time now: after its own last work and every blocking stream's (which it waits
// for; call after finish(true)).
double legacy_now() {
  double t = reg().legacy_clock;
  for (auto& [handle, q] : reg().streams)
    if (q->blocking) t = std::max(t, q->clock);
  return t;
}

// A new handle value (never dereferenced; never one a destroyed stream or event had).
void* token() { return reinterpret_cast<void*>((uintptr_t{0x51D7} << 32) + 16 * ++reg().handles); }

}  // namespace

cudaError_t enqueue(cudaStream_t s, Work work, double cost_us) {
  std::lock_guard<std::recursive_mutex> lock(reg().mu);
  if (!s) {
    finish(true);
    reg().legacy_clock = legacy_now() + cost_us;
    work();
    next_phase();
    return cudaSuccess;
  }
  Item item;
  item.work = std::move(work);
  return push_to(s, std::move(item), cost_us);
}

cudaError_t enqueue_async(cudaStream_t s, std::function<Poll()> start, double cost_us) {
  std::lock_guard<std::recursive_mutex> lock(reg().mu);
  if (!s) return bad_handle("work that completes later queued on the legacy stream (not emulated)");
  Item item;
  item.start = std::move(start);
  return push_to(s, std::move(item), cost_us);
}

cudaError_t stream_create(cudaStream_t* s, bool blocking) {
  if (!s) return bad_handle("cudaStreamCreate with a null handle pointer");
  std::lock_guard<std::recursive_mutex> lock(reg().mu);
  auto q = std::make_shared<Queue>();
  q->blocking = blocking;
  q->created = reg().created++;
  *s = static_cast<cudaStream_t>(token());
  reg().streams[*s] = std::move(q);
  return cudaSuccess;
}

cudaError_t stream_destroy(cudaStream_t s) {
  std::lock_guard<std::recursive_mutex> lock(reg().mu);
  auto q = find(s);
  if (!q) return bad_handle("cudaStreamDestroy of a stream that is not live");
  run_until(*q, q->issued);
  reg().streams.erase(s);
  return cudaSuccess;
}

cudaError_t stream_synchronize(cudaStream_t s) {
  std::lock_guard<std::recursive_mutex> lock(reg().mu);
  next_phase();
  if (!s) {
    finish(true);
    return cudaSuccess;
  }
  auto q = find(s);
  if (!q) return bad_handle("cudaStreamSynchronize of a stream that is not live");
  run_until(*q, q->issued);
  return cudaSuccess;
}

cudaError_t stream_wait_event(cudaStream_t s, cudaEvent_t e) {
  std::lock_guard<std::recursive_mutex> lock(reg().mu);
  auto it = reg().events.find(e);
  if (it == reg().events.end()) return bad_handle("cudaStreamWaitEvent on an event that is not live");
  const Mark m = it->second;
  if (!s) {  // the legacy stream runs at once, so its wait is satisfied now
    if (m.queue) run_until(*m.queue, m.until);
    return cudaSuccess;
  }
  auto q = find(s);
  if (!q) return bad_handle("cudaStreamWaitEvent on a stream that is not live");
  if (!m.queue) {  // an event of the legacy stream: its time only
    q->clock = std::max(q->clock, m.time);
    return cudaSuccess;
  }
  Item item;
  item.wait_for = m.queue;
  item.wait_until = m.until;
  push(*q, std::move(item));
  return cudaSuccess;
}

cudaError_t event_create(cudaEvent_t* e, bool timing) {
  if (!e) return bad_handle("cudaEventCreate with a null handle pointer");
  std::lock_guard<std::recursive_mutex> lock(reg().mu);
  *e = static_cast<cudaEvent_t>(token());
  Mark m;
  m.timing = timing;
  reg().events[*e] = m;
  return cudaSuccess;
}

cudaError_t event_destroy(cudaEvent_t e) {
  std::lock_guard<std::recursive_mutex> lock(reg().mu);
  if (!reg().events.erase(e)) return bad_handle("cudaEventDestroy of an event that is not live");
  return cudaSuccess;
}

cudaError_t event_record(cudaEvent_t e, cudaStream_t s) {
  std::lock_guard<std::recursive_mutex> lock(reg().mu);
  auto it = reg().events.find(e);
  if (it == reg().events.end()) return bad_handle("cudaEventRecord on an event that is not live");
  const bool timing = it->second.timing;
  if (!s) {  // an operation of the legacy stream: after the blocking streams' work, which then is done
    finish(true);
    Mark m;
    m.timing = timing;
    m.time = legacy_now();
    it->second = m;
    return cudaSuccess;
  }
  auto q = find(s);
  if (!q) return bad_handle("cudaEventRecord on a stream that is not live");
  Mark m;
  m.queue = q;
  m.until = q->issued;
  m.timing = timing;
  it->second = m;
  return cudaSuccess;
}

cudaError_t event_synchronize(cudaEvent_t e) {
  std::lock_guard<std::recursive_mutex> lock(reg().mu);
  auto it = reg().events.find(e);
  if (it == reg().events.end()) return bad_handle("cudaEventSynchronize on an event that is not live");
  const Mark m = it->second;
  next_phase();
  if (m.queue) run_until(*m.queue, m.until);
  return cudaSuccess;
}

cudaError_t event_query(cudaEvent_t e) {
  std::lock_guard<std::recursive_mutex> lock(reg().mu);
  auto it = reg().events.find(e);
  if (it == reg().events.end()) return bad_handle("cudaEventQuery on an event that is not live");
  const Mark m = it->second;
  if (!m.queue || m.queue->done >= m.until) return cudaSuccess;
  if (!run_until(*m.queue, m.until, false)) return cudaErrorNotReady;
  next_phase();  // the host may now read what the stream wrote: a synchronisation
  return cudaSuccess;
}

cudaError_t event_elapsed(float* ms, cudaEvent_t a, cudaEvent_t b) {
  std::lock_guard<std::recursive_mutex> lock(reg().mu);
  auto ia = reg().events.find(a), ib = reg().events.find(b);
  if (!ms || ia == reg().events.end() || ib == reg().events.end())
    return bad_handle("cudaEventElapsedTime on an event that is not live");
  if (!ia->second.timing || !ib->second.timing)
    return bad_handle("cudaEventElapsedTime on an event made with cudaEventDisableTiming");
  auto time_of = [](const Mark& m, double* t) {
    if (!m.queue) return *t = m.time, true;
    if (m.queue->done < m.until) return false;
    *t = m.queue->at[m.until];
    return true;
  };
  double ta = 0, tb = 0;
  if (!time_of(ia->second, &ta) || !time_of(ib->second, &tb)) return cudaErrorNotReady;
  *ms = static_cast<float>((tb - ta) / 1000.0);
  return cudaSuccess;
}

void device_synchronize() {
  std::lock_guard<std::recursive_mutex> lock(reg().mu);
  next_phase();
  finish(false);
}

void pin_phase(int k) {
  std::lock_guard<std::recursive_mutex> lock(reg().mu);
  reg().schedule = k >= 0 ? k : kRotate;
}

}  // namespace simt
