// How the weight matrices are drawn at step 0 (`gpt train --init`); GPT::init_unit applies it. Embeddings
// are N(0, 0.02) under both rules.
//   gpt2:  every matrix N(0, 0.02), as GPT-2 and llm.c do.
//   width: N(0, 0.02 * sqrt(768 / C)): std proportional to 1/sqrt(fan-in), equal to GPT-2's at its own width
//          (C = 768). At C = 48 the gpt2 rule's 0.02 leaves attention near uniform for thousands of steps, and
//          the step at which a model leaves that plateau, and so its final loss, depends on the seed (the
//          IsoFLOP study's notes measure it).
#pragma once
#include <string>

namespace gpt {

enum class InitRule { gpt2, width };
InitRule parse_init_rule(const std::string& s);  // "gpt2" | "width"; anything else fails naming --init
const char* init_rule_name(InitRule r);

}  // namespace gpt
