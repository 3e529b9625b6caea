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
#include <mutex>
#include <thread>

namespace gpt::watchdog {
namespace {

using Clock = std::chrono::steady_clock;

struct State {
  std::atomic<int64_t> last_ns{0};
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

[[noreturn]] void fire(double timeout_s, int rank, double idle_s) {
  State& s = state();
  std::string unit;
  {
    std::unique_lock<std::mutex> lock(s.mu, std::try_to_lock);  // the main thread may hold it: never wait
    if (lock.owns_lock()) unit = s.unit;
  }
  std::fprintf(stderr,
               "error: rank %d: no progress for %.0f s (--timeout %g) while in %s (step %lld, unit %s); ending this "
               "rank so the job does not hang\n",
               rank, idle_s, timeout_s, s.activity.load(), (long long)s.step.load(), unit.empty() ? "-" : unit.c_str());
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
    if (idle > timeout_s) {
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
  s.thread = std::thread(run, timeout_s, rank);
}

void stop() {
  State& s = state();
  {
    std::lock_guard<std::mutex> lock(s.mu);
    if (!s.running) return;
    s.running = false;
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

}  // namespace gpt::watchdog
