// llm.c model files: a 256 x int32 header [20240326, version, maxT, V, L, NH, C, Vp, 0...] followed by the
// tensors wte wpe ln1w ln1b qkvw qkvb attprojw attprojb ln2w ln2b fcw fcb fcprojw fcprojb lnfw lnfb, each
// holding all layers back to back; version 3 stores fp32, version 5 bf16. Our parameters live in per-unit
// flat buffers (model/layout.h), so load and save convert between the two orders.
#pragma once
#include <string>
#include <vector>

#include "src/model/config.h"
#include "src/model/layout.h"

namespace gpt {

struct ModelWeights {
  GPTConfig config;
  std::vector<std::vector<float>> units;  // units[u] has layout.unit(u).numel fp32 values
};

// Reads version 3 (fp32) or 5 (bf16, widened to fp32). Validates magic, version, every dimension, Vp
// against V, and the file size against the header; throws gpt::Error naming the file and the problem.
ModelWeights load_model_file(const std::string& path);
// The model shape a file holds, with the same checks as load_model_file but without reading the tensors.
GPTConfig read_model_file_config(const std::string& path);
// Writes version 3 (fp32) atomically. units[u] points at layout.unit(u).numel floats.
void save_model_file(const std::string& path, const Layout& layout, const std::vector<const float*>& units);

}  // namespace gpt
