// The engine --engine names (FsdpOptions::engine): FsdpEngine (engine.h) or NaiveEngine (naive_engine.h),
// over `world` (the engine's communicator) for the units of `layout`. Collective (the engine splits its groups).
#pragma once
#include <memory>

#include "src/fsdp/sharding_engine.h"

namespace gpt {

std::unique_ptr<ShardingEngine> make_engine(Backend& be, Communicator& world, const Layout& layout,
                                            const FsdpOptions& opt);

}  // namespace gpt
