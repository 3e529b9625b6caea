// The simulated machine's clock: the streams one rank's work runs on, and where each piece of work lands.
// The sim backend and the sim communicators place every op, copy and collective here, priced; waits order
// the streams exactly as on the real backends (events, copy tickets, Work::wait). Nothing else knows the
// order of a step: the model and the FSDP engine make their calls, and this records when they would run.
//
// Streams:
//  - host: the thread that issues everything. On the cpu backend every op runs on it (synchronous), so the
//    compute "stream" is the host; on cuda it queues work and runs only the host side's own ops
//    (offloaded states) and blocking waits.
//  - compute: the device's stream (cuda); an op starts at max(stream free, host's issue time).
//  - copy: host -> device and device -> host copies (cuda: one stream each); a copy starts after all work
//    queued so far.
//  - comm channels: one per communicator stream (NCCL: one, shared by a world's splits).
// Phases (what the step's critical timeline spends its time on): the compute stream's busy time by op kind,
// and its idle time by the wait that caused it: a collective (exposed_comm), a copy (copies), the host
// (the host's work in that interval by its own phase, else host_wait). On the cpu backend the host's
// timeline is the critical one. The phases sum to the step's time.
#pragma once
#include <array>
#include <cstdint>
#include <vector>

namespace gpt::sim {

enum class Phase : int { forward, recompute, backward, engine, copies, exposed_comm, optimizer, host_wait, count };
constexpr int kPhases = (int)Phase::count;
const char* phase_name(Phase p);
// The model's own compute (forward, recompute, backward), as against the engine's, copies and waits.
inline bool is_model_phase(Phase p) { return p == Phase::forward || p == Phase::recompute || p == Phase::backward; }

class Timeline {
 public:
  // async: a GPU backend (streams run beside the host); false: the cpu backend (everything on the host).
  explicit Timeline(bool async) : async_(async) {}
  bool async() const { return async_; }

  // An op of d seconds on the compute stream; returns when it ends.
  double compute(double d, Phase p);
  // Work of d seconds on the host thread (the host side's ops; on the cpu backend, every op).
  double host(double d, Phase p);
  // Where the next compute op would start: max(compute stream free, host), for trace timestamps.
  double now() const;
  double host_time() const { return host_; }
  double compute_free() const { return async_ ? compute_ : host_; }

  // A host <-> device copy of d seconds on the copy stream of its direction (host to device, or device to
  // host: the cuda backend's two copy streams, as PCIe moves both ways at once), after everything queued so
  // far; returns its ticket (1-based). The cpu backend copies at once, on the host.
  uint64_t copy(double d, bool to_host, double* start = nullptr);
  double copy_end(uint64_t ticket) const { return ticket ? copies_[ticket - 1] : 0; }
  // The compute stream (cpu: the host) waits until t; the idle time is charged to `cause`.
  void compute_waits(double t, Phase cause);
  // The host blocks until t (a blocking collective, a host-side copy wait), charged to `cause`.
  void host_waits(double t, Phase cause);
  // The host waits for every stream (Backend::synchronize).
  void synchronize();

  // Communicator streams: a channel and a collective of d seconds on it, ready at `ready`; returns its end.
  int add_channel();
  double on_channel(int channel, double d, double ready, double* start);

  // Ops queued on the compute stream so far (a collective waited with none queued since it was issued was
  // issued and waited at once).
  uint64_t compute_ops() const { return compute_ops_; }
  // The compute stream waited for a collective of d > 0 seconds that it issued and waited for at once: the model
  // compute since the previous such wait (or the restart) is one stretch.
  void waited_at_once();
  // The most model compute (forward, recompute, backward) the compute stream ran between two such waits since
  // the restart, the first stretch and the unfinished last one counted together (a next micro-step's first
  // joins this one's last); all of it when there was no such wait. Why a plan search wants it: during one
  // collective on the channel the compute stream runs at most one stretch (plan_search.h, rule 5).
  double longest_stretch() const;

  // Seconds per phase since the last restart(), and the step's time (the host after the final sync).
  const std::array<double, kPhases>& phases() const { return phases_; }
  // Forget the set-up (construction, allocation): every stream idle at time 0.
  void restart();

 private:
  struct HostSpan {
    double t0, t1;
    Phase p;
  };
  void charge_gap(double from, double to);  // compute idle in [from, to): host spans by phase, else host_wait
  bool async_;
  double host_ = 0, compute_ = 0, copy_[2] = {0, 0};  // copy_[to_host]
  std::vector<double> copies_;    // [ticket - 1]: end of that copy
  std::vector<double> channels_;  // free time per channel
  std::vector<HostSpan> host_log_;  // async: the host's busy spans the compute stream has not reached yet
  std::array<double, kPhases> phases_{};
  uint64_t compute_ops_ = 0;
  double stretch_ = 0, first_stretch_ = -1, longest_stretch_ = 0;  // model compute seconds (-1: no wait yet)
};

}  // namespace gpt::sim
