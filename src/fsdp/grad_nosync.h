// --no-sync: gradient accumulation without a reduction per micro-step. Backward accumulates every unit's
// gradient into a persistent full-unit fp32 buffer of its own (the accumulator) over the micro-steps, and only
// the last micro-step reduces it, through a gradient slot as GradSide does (which then holds no buffer of its
// own for the full gradient). So the reduction traffic falls from once per micro-step to once per step, and
// each rank keeps the whole model's gradient: the memory --no-sync trades for it.
#pragma once
#include <vector>

#include "src/fsdp/grad_side.h"

namespace gpt {

class NoSyncGrads : public GradSide {
 public:
  // The rows (engine_buffers.h) of unit u's accumulator.
  template <class F>
  static void unit_buffers(const EngineGeometry& g, int u, F&& f) {
    if (g.opt.no_sync && !g.direct_grads && !g.opt.inference)
      f(BufferSpec{EngineBuffer::nosync_acc, u, MemDomain::device, MemCat::gathered_grad, 4 * g.units[u].padded},
        &Accumulator::data);
  }

  NoSyncGrads(Backend& be, const Layout& layout, const EngineGeometry& geo, StateStore& store,
              std::unique_ptr<GradReducer> reducer, std::function<void()> changed);
  float* grad_buffer(int u, bool) override { return acc_[u].data; }
  void begin_micro_step(bool last_micro_step) override { last_micro_ = last_micro_step; }

 protected:
  bool reduces_now() const override { return last_micro_; }
  float* reduction_source(int u, GradSlot&) override { return acc_[u].data; }
  void after_reduction(int u, int slot) override;

 private:
  struct Accumulator {
    float* data = nullptr;  // (padded) fp32: the unit's gradient over the step's micro-steps
  };
  std::vector<Accumulator> acc_;  // [unit]
  bool last_micro_ = true;
};

}  // namespace gpt
