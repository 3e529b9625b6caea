// Parsing of the --offload list (offload_set.h).
#include "src/fsdp/offload_set.h"

#include <algorithm>

#include "src/core/check.h"

namespace gpt {

OffloadSet OffloadSet::parse(const std::string& s) {
  OffloadSet o;
  if (s == "none") return o;
  bool states = false;
  for (size_t at = 0; at <= s.size();) {  // every comma-separated part, empty ones included
    const size_t comma = std::min(s.find(',', at), s.size());
    const std::string part = s.substr(at, comma - at);
    at = comma + 1;
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
  return o;  // every part set one of the two (the loop runs at least once)
}

std::string OffloadSet::str() const {
  if (!activations) return FsdpOptions::name(states);
  return states == OffloadMode::none ? "activations" : std::string(FsdpOptions::name(states)) + ",activations";
}

}  // namespace gpt
