// Where the bundled data (data/gpt2 tokenizer files) is found when --data-dir is not given: ./data when it
// holds gpt2/, else the data/ folder of the source tree the binary was built in (build/gpt -> ../data),
// so commands work from any working directory.
#pragma once
#include <string>

namespace gpt {

std::string default_data_dir();

}  // namespace gpt
