// See resident.h.
#include "src/fsdp/resident.h"

namespace gpt {

ResidentParams::ResidentParams(const EngineGeometry& geo, StateStore& store) {
  for (int u = 0; u < (int)geo.units.size(); u++)
    unit_.push_back(geo.direct_params ? static_cast<const void*>(store.param(u)) : store.device_copy(u));
}

}  // namespace gpt
