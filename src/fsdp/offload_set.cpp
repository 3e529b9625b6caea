// Parsing of the --offload list (offload_set.h).
#include "src/fsdp/offload_set.h"

#include <sstream>

#include "src/core/check.h"

namespace gpt {

OffloadSet OffloadSet::parse(const std::string& s) {
  OffloadSet o;
  if (s == "none") return o;
  std::stringstream in(s);
  std::string part;
  bool states = false;
  while (std::getline(in, part, ',')) {
    if (part == "activations") {
      GPT_CHECK(!o.activations, "--offload: 'activations' given twice in '", s, "'");
      o.activations = true;
    } else if (part == "optimizer" || part == "params") {
      GPT_CHECK(!states, "--offload: name at most one of optimizer and params, got '", s, "'");
      states = true;
      o.states = FsdpOptions::parse_offload(part);
    } else {
      fail("--offload: expected none, or a comma list of optimizer|params and activations, got '", s, "'");
    }
  }
  GPT_CHECK(states || o.activations, "--offload: expected none, or a comma list of optimizer|params and activations, "
            "got '", s, "'");
  return o;
}

std::string OffloadSet::str() const {
  if (!activations) return FsdpOptions::name(states);
  return states == OffloadMode::none ? "activations" : std::string(FsdpOptions::name(states)) + ",activations";
}

}  // namespace gpt
