// How a unit's full gradient is summed over the ranks, chosen once for the geometry (make_grad_reducer) and
// applied in layers, outermost first:
//   the wire dtype  fp32 as it is (Fp32Grads), or --reduce-dtype bf16 with more than one rank (Bf16Grads):
//                   rounded to bf16 (nearest-even) before, every partial sum rounded to bf16 by the
//                   collective, and the result widened to fp32 after: half the bytes on the wire
//   hybrid          the slice's sum all-reduced again across the N/G replica groups (ReplicaSum), on the
//                   wire dtype: issued right behind the reduce-scatter on a stream-ordered communicator (NCCL's
//                   shared comm stream, the simulated one) and waited for with it; otherwise (MPI) run,
//                   blocking, when the slot completes
//   the sum         a reduce-scatter over the shard group, each rank receiving its slice's sum (G > 1), or an
//                   all-reduce over the replicas when one slice is the whole unit (G = 1) (GroupSum: the ZeRO
//                   choice, made where the collective is)
// Every collective sums; the mean over ranks is taken once, in fp32, by the add into the grad shard
// (StateStore::add_reduced). A collective's own average would differ: NCCL's on bf16 pre-multiplies each
// input by bf16(1/N), which for N = 3 scales every gradient by 3 x bf16(1/3) = 1.002.
#pragma once
#include <memory>
#include <string>

#include "src/backend/backend.h"
#include "src/dist/communicator.h"
#include "src/fsdp/geometry.h"
#include "src/model/layout.h"

namespace gpt {

// A gradient slot's buffers (GradSide::slot_buffers declares them) and its reduction in flight.
struct GradSlot {
  float* data = nullptr;      // (slot padded) fp32: the unit's full gradient (none under --no-sync)
  float* rs_out = nullptr;    // (slot shard) fp32: the reduce-scatter's output (G > 1)
  void* send_bf16 = nullptr;  // (slot padded) bf16: src rounded, the bf16 reduction's input (in place when G = 1)
  void* recv_bf16 = nullptr;  // (slot shard) bf16: the bf16 reduce-scatter's output (G > 1)
  float* src = nullptr;       // (padded) fp32: what is being reduced: data, or the unit's --no-sync accumulator
  bool reducing = false;      // its reduction is in flight
  WorkPtr work;               // the sum's collective
  WorkPtr replica_work;       // hybrid's replica all-reduce, when issued behind it
};

class GradReducer {
 public:
  virtual ~GradReducer() = default;
  // Starts summing g.src (unit u's full fp32 gradient) over the ranks.
  virtual void start(GradSlot& g, int u) = 0;
  // Waits for it; returns the (shard) fp32 sum this rank's grad shard receives.
  virtual const float* finish(GradSlot& g, int u) = 0;
};

std::unique_ptr<GradReducer> make_grad_reducer(Backend& be, Communicator& shard_comm, Communicator& replica_comm,
                                               const Layout& layout, const EngineGeometry& geo);

}  // namespace gpt
