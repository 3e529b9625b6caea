// Start-up agreement: every rank hashes the options that must be identical across ranks (model, batch,
// strategy, recompute, offload, seed, data) and the ranks compare hashes, so ranks launched with different
// configs stop with a message instead of deadlocking in mismatched collectives.
#pragma once
#include "src/dist/communicator.h"
#include "src/train/train_options.h"

namespace gpt {

uint64_t config_hash(const TrainOptions& opt);
// Throws gpt::Error on every rank when any two ranks disagree.
void check_same_config_on_all_ranks(Communicator& comm, const TrainOptions& opt);

}  // namespace gpt
