// See watchdog.h. The checking thread wakes every quarter second (or a tenth of the timeout, if smaller)
// and compares the time of the last beat with the timeout; on expiry it writes one line to stderr and
// _exits, without unwinding anything (the main thread is stuck, possibly inside MPI or a driver call).
#include "src/util/watchdog.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace gpt::watchdog {
namespace {

using Clock = std::chrono::steady_clock;

struct State {
  std::atomic<int64_t> last_ns{0};
  std::atomic<bool> polling{false};  // a device wait polls: it reports a hang itself
  std::atomic<double> timeout_s{0};  // of the running watchdog (0: none)
  std::atomic<int> rank{0};
  std::mutex sources_mu;             // guards sources and next_source
  std::map<int, HangSource> sources;
  int next_source = 1;
  std::atomic<const char*> activity{"start-up"};
  std::atomic<int64_t> step{0};
  std::mutex mu;           // guards unit, and the thread's lifetime below
  std::string unit;
  std::condition_variable cv;
  bool running = false;
  std::thread thread;
};

State& state() {
  static State* s = new State;  // never destroyed: the thread may outlive static destruction order
  return *s;
}

int64_t now_ns() { return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch()).count(); }

void touch() { state().last_ns.store(now_ns(), std::memory_order_relaxed); }

// The unit the model is in, for a message: "-" when none, or when the main thread holds the lock (a report
// never waits for it).
std::string unit_now() {
  State& s = state();
  std::unique_lock<std::mutex> lock(s.mu, std::try_to_lock);
  return lock.owns_lock() && !s.unit.empty() ? s.unit : "-";
}

[[noreturn]] void fire(double timeout_s, int rank, double idle_s) {
  State& s = state();
  const std::string unit = unit_now();
  std::fprintf(stderr,
               "error: rank %d: no progress for %.0f s (--timeout %g) while in %s (step %lld, unit %s); ending this "
               "rank so the job does not hang\n",
               rank, idle_s, timeout_s, s.activity.load(), (long long)s.step.load(), unit.c_str());
  std::fflush(stderr);
  _exit(124);
}

void run(double timeout_s, int rank) {
  State& s = state();
  const auto period = std::chrono::duration<double>(std::min(0.25, timeout_s / 10));
  std::unique_lock<std::mutex> lock(s.mu);
  while (s.running) {
    s.cv.wait_for(lock, period);
    if (!s.running) break;
    const double idle = (now_ns() - s.last_ns.load(std::memory_order_relaxed)) / 1e9;
    if (idle > timeout_s + (s.polling.load() ? kGraceS : 0)) {
      lock.unlock();
      fire(timeout_s, rank, idle);
    }
  }
}

}  // namespace

void start(double timeout_s, int rank) {
  stop();
  if (timeout_s <= 0) return;
  State& s = state();
  touch();
  std::lock_guard<std::mutex> lock(s.mu);
  s.running = true;
  s.timeout_s = timeout_s;
  s.rank = rank;
  s.thread = std::thread(run, timeout_s, rank);
}

void stop() {
  State& s = state();
  {
    std::lock_guard<std::mutex> lock(s.mu);
    if (!s.running) return;
    s.running = false;
    s.timeout_s = 0;
  }
  s.cv.notify_all();
  if (s.thread.joinable()) s.thread.join();
}

void beat(const char* activity) {
  state().activity.store(activity, std::memory_order_relaxed);
  touch();
}

void at_step(int64_t step) {
  state().step.store(step, std::memory_order_relaxed);
  touch();
}

void at_unit(const std::string& unit) {
  State& s = state();
  {
    std::lock_guard<std::mutex> lock(s.mu);
    s.unit = unit;
  }
  touch();
}

uint64_t next_issue_order() {
  static std::atomic<uint64_t> next{1};
  return next++;
}

int add_hang_source(HangSource source) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.sources_mu);
  s.sources[s.next_source] = std::move(source);
  return s.next_source++;
}

void remove_hang_source(int id) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.sources_mu);
  s.sources.erase(id);
}

namespace {

std::vector<HangSource> sources_now() {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.sources_mu);
  std::vector<HangSource> out;
  for (auto& kv : s.sources) out.push_back(kv.second);
  return out;
}

// The poll's deadline passed: name the work in flight, abort it, end the rank.
[[noreturn]] void report_hang(const char* what, double idle_s) {
  State& s = state();
  const std::vector<HangSource> sources = sources_now();
  InFlight oldest;
  for (const HangSource& h : sources) {
    if (!h.in_flight) continue;
    const InFlight f = h.in_flight();
    if (!f.what.empty() && (oldest.what.empty() || f.order < oldest.order)) oldest = f;
  }
  const std::string& work = oldest.what;
  for (const HangSource& h : sources)
    if (h.abort) h.abort();
  const std::string unit = unit_now();
  std::fprintf(stderr,
               "error: rank %d: %s did not complete in %.0f s (--timeout %g), waited for in %s (step %lld, unit %s): "
               "a peer rank stopped, or the device or the network hangs; aborted the collectives in flight, ending "
               "this rank\n",
               s.rank.load(), work.empty() ? "the device's work" : work.c_str(), idle_s, s.timeout_s.load(), what,
               (long long)s.step.load(), unit.c_str());
  std::fflush(stderr);
  _exit(124);
}

}  // namespace

// Polls as fast as the host allows (yielding the core to any other thread) for the first kYieldNs, which
// covers a step's host waits on a GPU, then in naps of kNapNs: past that a wait is a long step or a hang, and a
// nap adds at most 0.1 ms to it.
void wait_until(const char* what, const std::function<bool()>& done) {
  constexpr int64_t kYieldNs = 20'000'000, kNapNs = 100'000;
  State& s = state();
  struct Polling {
    State& s;
    bool was;
    explicit Polling(State& st) : s(st), was(st.polling.exchange(true)) {}
    ~Polling() { s.polling.store(was); }
  } polling(s);
  const int64_t t0 = now_ns();
  for (;;) {
    if (done()) return;
    {
      std::lock_guard<std::mutex> lock(s.sources_mu);
      for (auto& kv : s.sources)
        if (kv.second.check) kv.second.check();
    }
    const int64_t t = now_ns();
    const double timeout = s.timeout_s.load();
    const double idle = (t - s.last_ns.load(std::memory_order_relaxed)) / 1e9;
    if (timeout > 0 && idle > timeout) report_hang(what, idle);
    if (t - t0 < kYieldNs)
      std::this_thread::yield();
    else
      std::this_thread::sleep_for(std::chrono::nanoseconds(kNapNs));
  }
}

}  // namespace gpt::watchdog
