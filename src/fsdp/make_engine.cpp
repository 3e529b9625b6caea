// See make_engine.h.
#include "src/fsdp/make_engine.h"

#include "src/fsdp/engine.h"
#include "src/fsdp/naive_engine.h"

namespace gpt {

std::unique_ptr<ShardingEngine> make_engine(Backend& be, Communicator& world, const Layout& layout,
                                            const FsdpOptions& opt) {
  if (opt.engine == EngineKind::naive) return std::make_unique<NaiveEngine>(be, world, layout, opt);
  return std::make_unique<FsdpEngine>(be, world, layout, opt);
}

}  // namespace gpt
