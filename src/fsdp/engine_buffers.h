// The engine's buffers, declared by the parts that use them and allocated in one place. Each part (the
// states, the parameter side, the gradient side) lists its buffers as rows `f(spec, member)`: the buffer's
// BufferSpec (its EngineBuffer name, index, domain, ledger category and bytes, under the rule that makes it
// exist) and the member of the part's record it fills. Those rows are read three ways: EngineGeometry::buffers()
// lists the specs (what `gpt memplan` sums), EngineBuffers allocates and zeroes exactly that list, and each
// part binds its members from it by walking its own rows again. So allocation, plan and binding cannot drift.
//
// Adding a buffer: one place, a row in the owning part's list (StateStore::unit_buffers / staging_buffers /
// grad_slot_buffers, ParamSide::slot_buffers, GradSide::unit_buffers / slot_buffers), next to the member it
// fills; its EngineBuffer name (geometry.h) is the row's key. The order the lists are walked in, which is the
// allocation order, is for_each_buffer's (engine_buffers.cpp).
#pragma once
#include <map>
#include <utility>
#include <vector>

#include "src/backend/backend.h"
#include "src/fsdp/geometry.h"

namespace gpt {

// Every buffer of a geometry, allocated once (zeroed: the states start at zero, Adam's m and v must) and
// freed with it; parts find theirs by the row that declared it.
class EngineBuffers {
 public:
  EngineBuffers(const EngineGeometry& geo, Backend& device, Backend& host);
  ~EngineBuffers();
  EngineBuffers(const EngineBuffers&) = delete;
  EngineBuffers& operator=(const EngineBuffers&) = delete;

  // Points `member` (a float* or void* of a part's record) at the buffer the row `b` declared.
  template <class T>
  void bind(const BufferSpec& b, T*& member) const {
    member = static_cast<T*>(at(b));
  }

 private:
  void* at(const BufferSpec& b) const;
  Backend& owner(MemDomain d) { return d == MemDomain::host ? host_ : device_; }

  Backend& device_;
  Backend& host_;
  std::vector<std::pair<BufferSpec, void*>> all_;      // in allocation order
  std::map<std::pair<EngineBuffer, int>, void*> by_row_;  // (what, index) -> buffer
};

}  // namespace gpt
