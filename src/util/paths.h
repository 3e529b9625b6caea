// Where the bundled data (data/gpt2 tokenizer files) is found when --data-dir is not given, in this order:
// ./data when it holds gpt2/; the nearest data/ above the binary that does (build/gpt -> ../data, also for a
// tree that was moved); the data/ of the source tree the binary was built from (GPT_SOURCE_DATA_DIR, for a
// build directory outside the tree); else ./data, whose missing files are then the error. So commands work
// from any working directory.
#pragma once
#include <string>

namespace gpt {

std::string default_data_dir();

}  // namespace gpt
