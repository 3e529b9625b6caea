// See init_rule.h.
#include "src/model/init_rule.h"

#include "src/core/check.h"

namespace gpt {

InitRule parse_init_rule(const std::string& s) {
  GPT_CHECK(s == "gpt2" || s == "width", "--init: expected gpt2 or width, got '", s, "'");
  return s == "gpt2" ? InitRule::gpt2 : InitRule::width;
}

const char* init_rule_name(InitRule r) { return r == InitRule::gpt2 ? "gpt2" : "width"; }

}  // namespace gpt
