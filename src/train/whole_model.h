// The model's parameters whole, on every rank: what export writes and what tests compare across meshes.
#pragma once
#include <vector>

#include "src/backend/backend.h"
#include "src/fsdp/sharding_engine.h"
#include "src/model/gpt.h"

namespace gpt {

// Every unit of the model's layout without tensor parallelism (the same wrap), whole, on every rank: each
// unit gathered from the data-parallel shards (the engine's groups), then with tensor parallelism from the
// group's slices (every rank's unit u has the same size), each slice put in its place (scatter_unit).
// Collective over the engine's and the model's groups.
std::vector<std::vector<float>> whole_model_units(Backend& be, ShardingEngine& engine, GPT& model);

}  // namespace gpt
