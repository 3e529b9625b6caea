// See grad_reducer.h: the layers, innermost first.
#include "src/fsdp/grad_reducer.h"

namespace gpt {

namespace {

// What a sum reads and writes, in the dtype it travels in: in (padded), out (shard; in itself when G = 1).
struct Wire {
  const void* in;
  void* out;
  DType dt;
};

class WireSum {
 public:
  virtual ~WireSum() = default;
  virtual void start(GradSlot& g, const Wire& w, int u) = 0;
  virtual void finish(GradSlot& g, const Wire& w, int u) = 0;
};

// The sum: reduce-scatter over the shard group, or all-reduce over the replicas when G = 1.
class GroupSum : public WireSum {
 public:
  GroupSum(Communicator& shard, Communicator& replica, const Layout& layout, const EngineGeometry& geo)
      : shard_(shard), replica_(replica), layout_(layout), geo_(geo) {}
  void start(GradSlot& g, const Wire& w, int u) override {
    const UnitGeometry& ug = geo_.units[u];
    if (geo_.group > 1) {
      shard_.set_label(layout_.unit(u).name);
      g.work = shard_.reduce_scatter_async(w.out, w.in, (size_t)ug.shard_numel, w.dt, ReduceOp::sum);
    } else {
      replica_.set_label(layout_.unit(u).name);
      g.work = replica_.all_reduce_async(w.out, (size_t)ug.padded, w.dt, ReduceOp::sum);
    }
  }
  void finish(GradSlot& g, const Wire&, int) override {
    if (!g.work) return;
    g.work->wait();
    g.work.reset();
  }

 private:
  Communicator &shard_, &replica_;
  const Layout& layout_;
  const EngineGeometry& geo_;
};

// Hybrid: the inner sum over the shard group, then the slice's all-reduce across the replica groups.
class ReplicaSum : public WireSum {
 public:
  ReplicaSum(std::unique_ptr<WireSum> inner, Communicator& replica, const Layout& layout, const EngineGeometry& geo)
      : inner_(std::move(inner)), replica_(replica), layout_(layout), geo_(geo), behind_(replica.stream_ordered()) {}
  void start(GradSlot& g, const Wire& w, int u) override {
    inner_->start(g, w, u);
    if (!behind_) return;
    replica_.set_label(layout_.unit(u).name);
    g.replica_work = replica_.all_reduce_async(w.out, (size_t)geo_.units[u].shard_numel, w.dt, ReduceOp::sum);
  }
  void finish(GradSlot& g, const Wire& w, int u) override {
    inner_->finish(g, w, u);
    if (g.replica_work) {  // issued behind the reduce-scatter (start)
      g.replica_work->wait();
      g.replica_work.reset();
      return;
    }
    replica_.set_label(layout_.unit(u).name);
    replica_.all_reduce(w.out, (size_t)geo_.units[u].shard_numel, w.dt, ReduceOp::sum);
  }

 private:
  std::unique_ptr<WireSum> inner_;
  Communicator& replica_;
  const Layout& layout_;
  const EngineGeometry& geo_;
  bool behind_;  // the communicator is stream-ordered: issue the all-reduce behind the reduce-scatter
};

// The fp32 result's buffer: the reduce-scatter's output, or the reduced buffer itself when G = 1.
float* f32_result(GradSlot& g) { return g.rs_out ? g.rs_out : g.src; }

class Fp32Grads : public GradReducer {
 public:
  explicit Fp32Grads(std::unique_ptr<WireSum> sum) : sum_(std::move(sum)) {}
  void start(GradSlot& g, int u) override { sum_->start(g, wire(g), u); }
  const float* finish(GradSlot& g, int u) override {
    sum_->finish(g, wire(g), u);
    return f32_result(g);
  }

 private:
  static Wire wire(GradSlot& g) { return {g.src, f32_result(g), DType::F32}; }
  std::unique_ptr<WireSum> sum_;
};

class Bf16Grads : public GradReducer {
 public:
  Bf16Grads(std::unique_ptr<WireSum> sum, Backend& be, const EngineGeometry& geo)
      : sum_(std::move(sum)), be_(be), geo_(geo) {}
  void start(GradSlot& g, int u) override {
    be_.f32_to_bf16(g.send_bf16, g.src, (size_t)geo_.units[u].padded);  // (padded) fp32 -> bf16, nearest-even
    sum_->start(g, wire(g), u);
  }
  const float* finish(GradSlot& g, int u) override {
    const Wire w = wire(g);
    sum_->finish(g, w, u);
    float* out = f32_result(g);
    be_.bf16_to_f32(out, w.out, (size_t)geo_.units[u].shard_numel);  // exact
    return out;
  }

 private:
  static Wire wire(GradSlot& g) { return {g.send_bf16, g.recv_bf16 ? g.recv_bf16 : g.send_bf16, DType::BF16}; }
  std::unique_ptr<WireSum> sum_;
  Backend& be_;
  const EngineGeometry& geo_;
};

}  // namespace

std::unique_ptr<GradReducer> make_grad_reducer(Backend& be, Communicator& shard_comm, Communicator& replica_comm,
                                               const Layout& layout, const EngineGeometry& geo) {
  std::unique_ptr<WireSum> sum = std::make_unique<GroupSum>(shard_comm, replica_comm, layout, geo);
  if (geo.group > 1 && replica_comm.world() > 1)  // hybrid: shard groups with replicas across them
    sum = std::make_unique<ReplicaSum>(std::move(sum), replica_comm, layout, geo);
  if (geo.bf16_reduce) return std::make_unique<Bf16Grads>(std::move(sum), be, geo);
  return std::make_unique<Fp32Grads>(std::move(sum));
}

}  // namespace gpt
