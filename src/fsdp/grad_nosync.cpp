// See grad_nosync.h.
#include "src/fsdp/grad_nosync.h"

#include "src/fsdp/engine_buffers.h"

namespace gpt {

NoSyncGrads::NoSyncGrads(Backend& be, const Layout& layout, const EngineGeometry& geo, StateStore& store,
                         std::unique_ptr<GradReducer> reducer, std::function<void()> changed)
    : GradSide(be, layout, geo, store, std::move(reducer), std::move(changed)), acc_(geo.units.size()) {
  for (int u = 0; u < (int)acc_.size(); u++)
    unit_buffers(geo_, u, [&](const BufferSpec& b, auto member) { store_.buffers().bind(b, acc_[u].*member); });
}

// The accumulator starts the next step at zero; when G = 1 the offload copy of the result reads the
// accumulator itself, so that copy must finish first.
void NoSyncGrads::after_reduction(int u, int slot) {
  store_.release_copy_source(slot);
  be_.zero(acc_[u].data, (size_t)geo_.units[u].padded * sizeof(float));
}

}  // namespace gpt
