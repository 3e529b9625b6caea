// The engine's buffers, declared by the parts that use them and allocated in one place. Each part lists its
// buffers as rows `f(spec, member)` next to the record they fill: the buffer's BufferSpec (its EngineBuffer
// name, index, domain, ledger category and bytes, under the rule that makes it exist) and the member of the
// part's record it fills. The rows are read three ways: engine_buffer_specs() lists the specs (what
// `gpt memplan` sums), EngineBuffers allocates and zeroes exactly that list, and each part binds its members
// by walking its own rows again. So allocation, plan and binding cannot drift apart.
//
// Where the rows are, in allocation order (engine_buffers.cpp walks them):
//   per unit    StateStore::unit_buffers (the fp32 states, device copies), NoSyncGrads::unit_buffers
//   per slot    ParamSide::slot_buffers (gather slots), ShardUploads::stage_buffers (upload stages)
//   once        StateStore::staging_buffers
//   per grad slot  GradSide::slot_buffers, StateStore::grad_slot_buffers (the host copy of a reduction)
// Adding a buffer: one row in its part's list, keyed by a new EngineBuffer name (geometry.h).
#pragma once
#include <map>
#include <utility>
#include <vector>

#include "src/backend/backend.h"
#include "src/fsdp/geometry.h"

namespace gpt {

// The specs of every buffer of a geometry, in allocation order.
std::vector<BufferSpec> engine_buffer_specs(const EngineGeometry& geo);

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
