// See step_order.h.
#include "src/fsdp/step_order.h"

#include "src/core/check.h"

namespace gpt {

namespace {
const char* pass_name(Pass p) { return p == Pass::forward ? "forward" : "backward"; }
}  // namespace

StepOrder::StepOrder(const Layout& layout) : layout_(layout), units_(layout.num_units()) {}

void StepOrder::acquire(int u, Pass pass) {
  const int n = (int)units_.size();
  GPT_CHECK(u >= 0 && u < n, "fsdp: acquire of unit ", u, " outside [0, ", n, ")");
  const int pos = layout_.pass_position(pass, u), last = last_pos_[(int)pass];
  GPT_CHECK(pos == 0 || pos == last + 1, "fsdp: acquire(", name(u), ", ", pass_name(pass), ") out of order: expected ",
            last + 1 < n ? name(layout_.pass_order(pass)[last + 1]) : std::string("a new pass"), " (Layout::pass_order)");
  GPT_CHECK(!units_[u].held, "fsdp: acquire(", name(u), ", ", pass_name(pass), ") while it is still held from the ",
            pass_name(units_[u].pass), " pass (release it first)");
  last_pos_[(int)pass] = pos;
  units_[u].held = true;
  units_[u].pass = pass;
}

void StepOrder::release(int u, Pass pass) {
  const bool known = u >= 0 && u < (int)units_.size();
  GPT_CHECK(known && units_[u].held && units_[u].pass == pass, "fsdp: release(", known ? name(u) : std::to_string(u),
            ", ", pass_name(pass), ") of a unit not acquired in that pass");
  units_[u].held = false;
}

bool StepOrder::grad_buffer(int u) {
  UnitUse& x = units_[u];
  GPT_CHECK(x.held && x.pass == Pass::backward, "fsdp: grad_buffer(", name(u), ") outside its backward (between acquire(",
            name(u), ", backward) and grad_ready)");
  const bool opens = !x.grad_open;
  x.grad_open = true;
  return opens;
}

void StepOrder::grad_ready(int u) {
  GPT_CHECK(units_[u].grad_open, "fsdp: grad_ready(", name(u), ") without a grad_buffer since its last grad_ready");
  units_[u].grad_open = false;
}

void StepOrder::check_not_held(int u, const char* what) const {
  GPT_CHECK(!units_[u].held, "fsdp: ", what, " while unit ", name(u), " is held by the model (release it first)");
}

void StepOrder::check_quiet(const char* what) const {
  for (int u = 0; u < (int)units_.size(); u++) {
    check_not_held(u, what);
    GPT_CHECK(!units_[u].grad_open, "fsdp: ", what, " while unit ", name(u), " has a gradient without its grad_ready");
  }
}

}  // namespace gpt
