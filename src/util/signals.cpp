// See signals.h. The handler only touches a lock-free atomic and, on the second signal, calls _exit.
#include "src/util/signals.h"

#include <unistd.h>

#include <atomic>
#include <csignal>

namespace gpt {
namespace {
std::atomic<int> g_stops{0};

void on_stop(int sig) {
  if (g_stops.fetch_add(1) >= 1) _exit(128 + sig);
}
}  // namespace

void install_stop_handlers() {
  struct sigaction sa {};
  sa.sa_handler = on_stop;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
}

int stop_signals_received() { return g_stops.load(); }

}  // namespace gpt
