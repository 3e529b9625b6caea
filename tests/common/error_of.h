// The message of the gpt::Error a callable throws, or "(no error)": lets a test assert that bad input is
// refused AND that the message names the file or flag.
#pragma once
#include <string>

#include "src/core/check.h"

namespace gpt::test {

template <typename F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const gpt::Error& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace gpt::test
