// Which files hold a Hugging Face GPT-2 model: one model.safetensors, or the shards of a sharded checkpoint,
// and the config.json beside them.
//
// `gpt import --from` takes
//   - a folder: its model.safetensors, else its model.safetensors.index.json (the order from_pretrained
//     looks in); config.json in the folder when present;
//   - a .safetensors file: that file; config.json beside it when present;
//   - an index (a name ending in .json; a config.json stands for its folder): the shards it names.
// The sharded layout (model-00001-of-0000N.safetensors ... with model.safetensors.index.json):
//   {"metadata": {"total_size": BYTES}, "weight_map": {"<tensor name>": "<shard file name>", ...}}
// Checks, each a one-line error naming the index or the shard: the index is that JSON (metadata optional,
// total_size a non-negative integer, informational only), every shard named is a plain file name in the
// index's folder and exists, every tensor of the weight_map is in the shard it names, no tensor is in two
// shards, and no shard holds a tensor the weight_map does not name. Coverage of GPT-2's tensors is checked
// afterwards on the union, as for one file (io/hf_gpt2.h).
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "src/io/safetensors.h"

namespace gpt {

struct HfTensorRef {
  const StTensor* tensor;
  const SafetensorsReader* file;  // the file holding it
};

struct HfSource {
  std::string path;         // as given
  std::string config_path;  // "" when there is no config.json
  std::string index_path;   // "" for a single file
  std::vector<std::unique_ptr<SafetensorsReader>> files;  // (shards,) sorted by name; one for a single file
  std::vector<HfTensorRef> tensors;                       // every tensor of every file, file by file
};

// Resolves `path` as above and opens (and validates) every file; no tensor data is read.
HfSource open_hf_source(const std::string& path);

}  // namespace gpt
