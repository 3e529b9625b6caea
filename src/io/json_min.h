// A minimal, strict JSON reader for the one shape the project reads: an object whose values are all
// integers, e.g. GPT-2's encoder.json ({"token": id, ...}). Keys come back as UTF-8 bytes with every
// escape resolved (\uXXXX including surrogate pairs). Anything else — a missing brace, a float value,
// a lone surrogate, invalid UTF-8, a control character inside a string, trailing garbage — throws
// gpt::Error "<source>: byte <offset>: <what was expected>".
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace gpt {

// Entries in file order; duplicate keys are returned as they are (the caller decides). Values must be
// integers in [-2^31, 2^31).
std::vector<std::pair<std::string, int32_t>> parse_json_int_object(std::string_view json,
                                                                   const std::string& source);

}  // namespace gpt
