// See sim_comm.h.
#include "src/sim/sim_comm.h"

#include <algorithm>

#include "src/core/check.h"
#include "src/dist/comm_volume.h"
#include "src/util/trace.h"

namespace gpt::sim {

struct Pending {
  CollKind kind;
  int64_t bytes = 0;
  double dur = 0, ready = 0, end = 0;
  uint64_t compute_ops = 0;  // the compute stream's ops queued when it was issued
  bool done = false;
  std::string name;
};

struct SimNetwork {
  Timeline* tl = nullptr;
  const NetworkModel* net = nullptr;
  bool overlap = true, stream_ordered = false;
  int world = 1, ranks_per_node = 1, channel = 0;
  std::deque<std::shared_ptr<Pending>> fifo;  // no overlap: started, not yet progressed
  int gathers_in_flight = 0;
  double comm_seconds = 0;
  double gather_seconds = 0;  // of which all-gathers
  int64_t timed_calls = 0;    // collectives that take time (d > 0)

  // Runs the FIFO up to and including p, on the host (MPI progresses only inside a wait), from the moment the
  // wait is reached: the host there, behind the device work queued before it (device buffers), so every
  // byte is exposed.
  void progress_until(const Pending& p) {
    while (!p.done) {
      std::shared_ptr<Pending> f = fifo.front();
      fifo.pop_front();
      const double start = std::max(tl->now(), f->ready);
      tl->host_waits(start + f->dur, Phase::exposed_comm);
      f->end = tl->host_time();
      f->done = true;
      trace::span(trace::kCommStream, f->name, "comm", start * 1e6, f->end * 1e6);
    }
  }
};

namespace {

class SimWork : public Work {
 public:
  SimWork(std::shared_ptr<SimNetwork> n, std::shared_ptr<Pending> p, CommLedger* ledger)
      : n_(std::move(n)), p_(std::move(p)), ledger_(ledger) {}
  ~SimWork() override { wait(); }
  void wait() override {
    if (waited_) return;
    waited_ = true;
    if (n_->overlap) {
      n_->tl->compute_waits(p_->end, Phase::exposed_comm);
      if (p_->dur > 0 && n_->tl->compute_ops() == p_->compute_ops) n_->tl->waited_at_once();
    } else
      n_->progress_until(*p_);
    ledger_->add_in_flight(-p_->bytes);
    if (p_->kind == CollKind::all_gather) n_->gathers_in_flight--;
  }

 private:
  std::shared_ptr<SimNetwork> n_;
  std::shared_ptr<Pending> p_;
  CommLedger* ledger_;
  bool waited_ = false;
};

class SimCommunicator : public Communicator {
 public:
  // consecutive: this group is one of the world's consecutive blocks of size x stride ranks (split_contiguous)
  SimCommunicator(std::shared_ptr<SimNetwork> n, int size, int stride, bool consecutive = false)
      : n_(std::move(n)), size_(size), stride_(stride) {
    // Priced where its slowest group runs: a group that straddles a node boundary crosses the network, sharing
    // each node's with the rings crossing the node's other boundary (one per offset of the stride).
    if (consecutive && group_straddles_nodes(size_, stride_, n_->ranks_per_node, n_->world)) {
      priced_per_node_ = std::max(1, n_->ranks_per_node % (size_ * stride_) / stride_);
      network_share_ = 1.0 / (2.0 * stride_);
    } else {
      priced_per_node_ = local_size();
    }
  }
  std::string name() const override { return "sim"; }
  bool stream_ordered() const override { return n_->stream_ordered; }
  int rank() const override { return 0; }
  int world() const override { return size_; }
  int local_rank() const override { return 0; }
  int local_size() const override { return std::min(size_, (n_->ranks_per_node + stride_ - 1) / stride_); }

  WorkPtr all_gather_async(void*, const void*, size_t count, DType dt) override {
    return start(CollKind::all_gather, ring_all_gather_bytes(count, dt, size_), "all-gather", dt);
  }
  WorkPtr reduce_scatter_async(void*, const void*, size_t count, DType dt, ReduceOp) override {
    return start(CollKind::reduce_scatter, ring_reduce_scatter_bytes(count, dt, size_), "reduce-scatter", dt);
  }
  WorkPtr all_reduce_async(void*, size_t count, DType dt, ReduceOp) override {
    return start(CollKind::all_reduce, ring_all_reduce_bytes(count, dt, size_), "all-reduce", dt);
  }
  void broadcast(void*, size_t bytes, int) override {
    start(CollKind::broadcast, ring_broadcast_bytes(bytes, size_), "broadcast")->wait();
  }
  void barrier() override { scalar(); }
  double all_reduce_scalar(double x, ReduceOp) override {
    scalar();
    return x;
  }
  double all_reduce_max(double x) override {
    scalar();
    return x;
  }
  std::unique_ptr<Communicator> split(int, int) override {
    fail("the simulated machine splits a group only by its shape (split_contiguous, split_strided)");
  }
  std::unique_ptr<Communicator> split_contiguous(int size) override {
    GPT_CHECK(size >= 1 && size_ % size == 0, "sim: a group of ", size, " does not divide ", size_, " ranks");
    return std::make_unique<SimCommunicator>(n_, size, stride_, /*consecutive=*/true);
  }
  std::unique_ptr<Communicator> split_strided(int stride) override {
    GPT_CHECK(stride >= 1 && size_ % stride == 0, "sim: a stride of ", stride, " does not divide ", size_, " ranks");
    return std::make_unique<SimCommunicator>(n_, size_ / stride, stride_ * stride);
  }
  void abort(int code) override { fail("sim: abort(", code, ")"); }
  SimNetwork& network() { return *n_; }

 private:
  // A blocking scalar reduction of the host's (loss, norm): its latency, on the host.
  void scalar() {
    if (size_ == 1 || !n_->net) return;
    const double d = n_->net->scalar_seconds(size_, priced_per_node_, network_share_);
    n_->tl->host_waits(n_->tl->host_time() + d, Phase::exposed_comm);
  }
  WorkPtr start(CollKind kind, int64_t bytes, const char* what, DType dt = DType::F32) {
    ledger_.record(kind, bytes);
    ledger_.add_in_flight(bytes);
    auto p = std::make_shared<Pending>();
    p->kind = kind;
    p->bytes = bytes;
    p->dur = size_ > 1 && n_->net ? n_->net->seconds(kind, bytes, size_, priced_per_node_, dt, network_share_) : 0;
    const std::string label = take_label();  // the engine's unit: "all-gather blocks3 1024 B over 4"
    if (trace::on()) p->name = str(what, label.empty() ? "" : " " + label, " ", bytes, " B over ", size_);
    n_->comm_seconds += p->dur;
    n_->timed_calls += p->dur > 0;
    if (kind == CollKind::all_gather) n_->gather_seconds += p->dur;
    if (kind == CollKind::all_gather) n_->gathers_in_flight++;
    Timeline& tl = *n_->tl;
    p->compute_ops = tl.compute_ops();
    if (n_->overlap || p->dur == 0) {
      // The comm stream waits for the compute stream's work queued so far (the inputs), then runs it.
      double s = 0;
      p->end = tl.on_channel(n_->channel, p->dur, tl.now(), &s);
      p->done = !n_->overlap;
      if (p->dur > 0) trace::span(trace::kCommStream, p->name, "comm", s * 1e6, p->end * 1e6);
    } else {
      p->ready = tl.now();  // its inputs: the compute stream's work queued so far
      n_->fifo.push_back(p);
    }
    return std::make_unique<SimWork>(n_, p, &ledger_);
  }

  std::shared_ptr<SimNetwork> n_;
  int size_, stride_;
  int priced_per_node_ = 1;    // the group's ranks on one node, as its collectives are priced
  double network_share_ = 0;   // of a node's network, when it spans nodes (0: the network model's r / R)
};

SimNetwork& network_of(Communicator& c) {
  auto* s = dynamic_cast<SimCommunicator*>(&c);
  GPT_CHECK(s, "sim: ", c.name(), " is not the simulated machine's communicator");
  return s->network();
}

}  // namespace

bool group_straddles_nodes(int size, int stride, int ranks_per_node, int world) {
  const int64_t span = (int64_t)size * stride;  // world ranks from a group's first to the next group's first
  const int64_t first_group_end = (int64_t)(size - 1) * stride + 1;
  return world > ranks_per_node && size > 1 && first_group_end <= ranks_per_node && ranks_per_node % span != 0;
}

std::unique_ptr<Communicator> make_sim_world(int world, int ranks_per_node, Timeline& tl, const NetworkModel* net,
                                             bool overlap, bool stream_ordered) {
  auto n = std::make_shared<SimNetwork>();
  n->stream_ordered = stream_ordered;
  n->tl = &tl;
  n->net = net;
  n->overlap = overlap;
  n->world = world;
  n->ranks_per_node = ranks_per_node;
  n->channel = tl.add_channel();
  return std::make_unique<SimCommunicator>(n, world, 1);
}

int sim_gathers_in_flight(Communicator& c) { return network_of(c).gathers_in_flight; }
double sim_comm_seconds(Communicator& c) { return network_of(c).comm_seconds; }
double sim_gather_seconds(Communicator& c) { return network_of(c).gather_seconds; }
int64_t sim_timed_calls(Communicator& c) { return network_of(c).timed_calls; }

}  // namespace gpt::sim
