// The communication ledger: bytes each rank sends and receives, per collective kind, per step.
// Accounting follows the ring algorithms that NCCL and MPI use and that the ZeRO paper counts:
//   all_gather of a total of S bytes (S/N per rank):  sends and receives S*(N-1)/N
//   reduce_scatter of S bytes in:                      sends and receives S*(N-1)/N
//   all_reduce of S bytes:                             sends and receives 2*S*(N-1)/N
// so the totals reproduce the ZeRO / FSDP volume formulas exactly.
#pragma once
#include <array>
#include <cstdint>
#include <mutex>
#include <string>

namespace gpt {

enum class CollKind : int { all_gather, reduce_scatter, all_reduce, broadcast, count };
constexpr int kCollKinds = static_cast<int>(CollKind::count);
const char* collkind_name(CollKind k);

struct CommCounters {
  std::array<int64_t, kCollKinds> bytes_sent{};
  std::array<int64_t, kCollKinds> calls{};
  int64_t total_sent() const;
};

class CommLedger {
 public:
  void record(CollKind kind, int64_t bytes_sent);
  CommCounters step() const;   // since the last begin_step()
  CommCounters total() const;  // since construction
  void begin_step();           // zero the per-step counters
  // Bytes currently in flight (started, not yet waited), for the trace's counter track.
  void add_in_flight(int64_t delta);
  int64_t in_flight() const;

 private:
  mutable std::mutex mu_;
  CommCounters step_, total_;
  int64_t in_flight_ = 0;
};

}  // namespace gpt
