// The communication ledger: a thread-safe tally of the bytes each collective sends, per kind, per step
// and in total, plus the bytes of collectives started but not yet waited for. The communicators compute
// the byte figures (dist/comm_volume.h holds the ring formulas); the ledger only adds them up, so a test
// can compare its totals with the ZeRO / FSDP volume formulas.
#include "src/dist/comm_ledger.h"

#include "src/core/check.h"

namespace gpt {

const char* collkind_name(CollKind k) {
  switch (k) {
    case CollKind::all_gather: return "all_gather";
    case CollKind::reduce_scatter: return "reduce_scatter";
    case CollKind::all_reduce: return "all_reduce";
    case CollKind::broadcast: return "broadcast";
    case CollKind::count: break;
  }
  fail("collkind_name: ", static_cast<int>(k), " is not a collective kind (expected 0..", kCollKinds - 1, ")");
}

int64_t CommCounters::total_sent() const {
  int64_t sum = 0;
  for (int64_t b : bytes_sent) sum += b;
  return sum;
}

void CommLedger::record(CollKind kind, int64_t bytes_sent) {
  int k = static_cast<int>(kind);
  GPT_CHECK(k >= 0 && k < kCollKinds, "CommLedger::record: bad collective kind ", k);
  GPT_CHECK(bytes_sent >= 0, "CommLedger::record: negative byte count ", bytes_sent, " for ", collkind_name(kind));
  std::lock_guard<std::mutex> lock(mu_);
  step_.bytes_sent[k] += bytes_sent;
  step_.calls[k] += 1;
  total_.bytes_sent[k] += bytes_sent;
  total_.calls[k] += 1;
}

CommCounters CommLedger::step() const {
  std::lock_guard<std::mutex> lock(mu_);
  return step_;
}

CommCounters CommLedger::total() const {
  std::lock_guard<std::mutex> lock(mu_);
  return total_;
}

void CommLedger::begin_step() {
  std::lock_guard<std::mutex> lock(mu_);
  step_ = CommCounters{};
}

void CommLedger::add_in_flight(int64_t delta) {
  std::lock_guard<std::mutex> lock(mu_);
  in_flight_ += delta;
  GPT_CHECK(in_flight_ >= 0, "CommLedger::add_in_flight: in-flight bytes went negative (", in_flight_,
            "): a collective was waited for twice or never started");
}

int64_t CommLedger::in_flight() const {
  std::lock_guard<std::mutex> lock(mu_);
  return in_flight_;
}

}  // namespace gpt
