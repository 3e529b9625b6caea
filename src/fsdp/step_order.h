// The ParamSource protocol (model/param_source.h), checked. The full engine checks every call of the model
// here before its parts act on it, so the parts can take the order as given:
//  - a pass acquires its units in Layout::pass_order (the first unit of the order starts a new pass) and
//    releases each before acquiring it again;
//  - a unit's grad_buffer comes between its backward acquire and its release, and its grad_ready after a
//    grad_buffer;
//  - the step's own moments (begin_step, grad_sumsq, update_params, loading a unit) find no unit held and no
//    gradient open.
// A call out of order throws gpt::Error naming the unit and what was expected.
#pragma once
#include <string>
#include <vector>

#include "src/model/layout.h"

namespace gpt {

class StepOrder {
 public:
  explicit StepOrder(const Layout& layout);
  void acquire(int u, Pass pass);
  void release(int u, Pass pass);
  // Returns true when this call opens u's gradient for the micro-step (the first since its grad_ready).
  bool grad_buffer(int u);
  void grad_ready(int u);
  // No unit held by the model and no gradient open, or throw naming `what`.
  void check_quiet(const char* what) const;
  void check_not_held(int u, const char* what) const;  // throws naming `what` when the model holds u

 private:
  struct UnitUse {
    bool held = false;       // acquired and not yet released
    Pass pass = Pass::forward;
    bool grad_open = false;  // a grad_buffer since its last grad_ready
  };
  const std::string& name(int u) const { return layout_.unit(u).name; }

  const Layout& layout_;
  std::vector<UnitUse> units_;
  int last_pos_[2] = {-1, -1};              // [pass]: position of the last unit acquired in the pass
};

}  // namespace gpt
