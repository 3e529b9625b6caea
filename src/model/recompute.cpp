// Parsing and per-layer decisions of RecomputePolicy (see recompute.h).
#include "src/model/recompute.h"

#include <cstdlib>

#include "src/core/check.h"

namespace gpt {

RecomputePolicy RecomputePolicy::parse(const std::string& s) {
  RecomputePolicy p;
  if (s == "none") return p;
  if (s == "full") {
    p.mode = Mode::full;
    return p;
  }
  if (s == "selective") {
    p.mode = Mode::selective;
    return p;
  }
  if (s.rfind("every:", 0) == 0) {
    char* end = nullptr;
    long k = std::strtol(s.c_str() + 6, &end, 10);
    GPT_CHECK(end && *end == '\0' && k >= 1 && k <= 1000000,
              "--recompute every:K needs an integer K >= 1, got '", s, "'");
    p.mode = Mode::every;
    p.every_k = (int)k;
    return p;
  }
  fail("--recompute: expected none, full, every:K or selective, got '", s, "'");
}

std::string RecomputePolicy::str() const {
  switch (mode) {
    case Mode::none: return "none";
    case Mode::full: return "full";
    case Mode::every: return gpt::str("every:", every_k);
    case Mode::selective: return "selective";
  }
  return "?";
}

bool RecomputePolicy::layer_recomputes_all(int layer) const {
  if (mode == Mode::full) return true;
  if (mode == Mode::every) return layer % every_k == 0;
  return false;
}

}  // namespace gpt
