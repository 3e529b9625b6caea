// Sharded training checkpoints. Each rank writes its own file with its shards (fp32 params, Adam m and
// v) and the metadata to place them: world size, shard-group size, strategy, model config, every unit's
// size, padding, shard size and offset, plus the step, RNG state and data position. A checkpoint
// directory counts as complete only when manifest.txt (written last, by rank 0, with every file's size
// and CRC-32) exists; resume picks the newest complete one and verifies the checksums.
//
// Loading reshards: a rank reads, from whichever saved files cover them, exactly the elements of its new
// shard, tensor by tensor, so a run saved at 4 ranks continues at 2 or 3 (or 1), one saved under one --wrap
// continues under another, and one saved with one tensor-parallel size under another (the files record the
// wrap and the size). `gpt export` uses the same reader to consolidate full units into an llm.c model file.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "src/core/rng.h"
#include "src/dist/communicator.h"
#include "src/fsdp/sharding_engine.h"
#include "src/io/data_loader.h"

namespace gpt {

struct TrainProgress {
  int64_t step = 0;        // optimizer steps completed
  Rng rng{1337};           // sampling RNG
  DataPosition data;       // training data position
  int bad_steps = 0;       // consecutive non-finite steps (NaN guard)
  int64_t updates = 0;     // AdamW updates applied: step less the skipped steps; AdamW's bias-correction count
  std::string saved_wrap;  // load_checkpoint: the wrap the checkpoint was saved with (--wrap's spelling)
  int saved_tp = 1;        // load_checkpoint: the tensor-parallel size it was saved with
};

// Writes <run_dir>/ckpt_<step>/ (collective: every rank calls it). Keeps the newest `keep` complete ones.
// Returns the directory written. `world`: every rank of the run, when it is more than the engine's (tensor
// parallelism: the engine's world is one data-parallel group of the mesh); null: the engine's.
std::string save_checkpoint(const std::string& run_dir, ShardingEngine& engine, const TrainProgress& progress,
                            int keep, Communicator* world = nullptr);
// Newest complete checkpoint directory under run_dir, or "" when there is none.
std::string find_latest_checkpoint(const std::string& run_dir);
// Loads a checkpoint into the engine (any world size), verifying manifest checksums and that the model
// config matches. Throws gpt::Error naming the file on any mismatch.
// verify = false skips the checksums when verify_checkpoint already ran on this directory.
// world: as save_checkpoint's.
TrainProgress load_checkpoint(const std::string& ckpt_dir, ShardingEngine& engine, bool verify = true,
                              Communicator* world = nullptr);
// Collective: the manifest, every file's size and CRC-32, the headers, and the model config against the run's.
// Throws gpt::Error naming the file on any mismatch (on every rank).
void verify_checkpoint(const std::string& ckpt_dir, Communicator& world, const GPTConfig& run);

// Offline: the full fp32 parameters of every unit of a checkpoint in the default layout (Layout(config), for
// export), and its model config.
struct ConsolidatedModel {
  GPTConfig config;
  std::vector<std::vector<float>> units;
};
ConsolidatedModel consolidate_checkpoint(const std::string& ckpt_dir);
// The model config of a checkpoint, from its manifest and file headers (no shard data read).
GPTConfig checkpoint_config(const std::string& ckpt_dir);

}  // namespace gpt
