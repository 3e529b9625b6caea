// Agreement on failure: run a piece of work that may throw gpt::Error on some ranks only (a bad file, a
// config mismatch), then let every rank learn whether any rank failed, so they all stop together with a
// message instead of the healthy ones hanging in the next collective.
#pragma once
#include <functional>

#include "src/core/check.h"
#include "src/dist/communicator.h"

namespace gpt {

// Runs fn; if it throws gpt::Error on any rank, every rank throws: the failing ranks their own message,
// the others "<what>: failed on rank R (see its message)".
inline void collective_check(Communicator& comm, const char* what, const std::function<void()>& fn) {
  std::string mine;
  try {
    fn();
  } catch (const Error& e) {
    mine = e.what();
  }
  // lowest failing rank + 1, or 0 when all succeeded (max over "world - rank" picks the lowest rank)
  const double flag = mine.empty() ? 0.0 : (double)(comm.world() - comm.rank());
  const double worst = comm.world() > 1 ? comm.all_reduce_max(flag) : flag;
  if (!mine.empty()) throw Error(mine);
  if (worst > 0) fail(what, ": failed on rank ", comm.world() - (int)worst, " (see its message)");
}

}  // namespace gpt
