// The flags shared by `gpt train` and `gpt bench` (model, batch, optimizer, sharding, recompute,
// offload), parsed into TrainOptions with validation, and their help text.
#pragma once
#include "src/cli/flags.h"
#include "src/train/train_options.h"

namespace gpt {

// Model config from --config and the custom-size flags (also used by memplan). The vocabulary and the
// tokenizer (into *tokenizer: byte, gpt2, auto or none) follow the tokenizer record beside the --train /
// --val shards when there is one (io/token_record.h); flags that contradict it are an error.
GPTConfig parse_model_flags(Flags& f, std::string* config_name, const std::string& default_config,
                            std::string* tokenizer = nullptr);
TrainOptions parse_train_flags(Flags& f, const std::string& default_config);
extern const char* kModelFlagsHelp;
extern const char* kTrainFlagsHelp;
extern const std::set<std::string> kTrainSwitches;

}  // namespace gpt
