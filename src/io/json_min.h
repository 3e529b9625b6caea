// A minimal, strict JSON reader for the two shapes the project reads: an object whose values are all
// integers, e.g. GPT-2's encoder.json ({"token": id, ...}), and any JSON value (a safetensors header:
// objects, arrays, strings, numbers). Strings come back as UTF-8 bytes with every escape resolved
// (\uXXXX including surrogate pairs). Anything else — a missing brace, a float where an integer belongs,
// a lone surrogate, invalid UTF-8, a control character inside a string, trailing garbage, nesting deeper
// than 64 — throws gpt::Error "<source>: byte <offset>: <what was expected>".
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

// Any JSON value. Numbers keep their literal text, so integers are read exactly (as_u64), never through a
// double; objects keep their members in document order, duplicate keys included (the caller decides).
struct JsonValue {
  enum class Kind { null, boolean, number, string, array, object };
  Kind kind = Kind::null;
  bool boolean = false;
  std::string text;                                        // string: decoded UTF-8; number: the literal
  std::vector<JsonValue> items;                            // array elements
  std::vector<std::pair<std::string, JsonValue>> members;  // object members, document order
  size_t offset = 0;                                       // byte offset of the value in the input

  const char* kind_name() const;  // "null", "a boolean", "a number", "a string", "an array", "an object"
  // The value as an unsigned integer: false unless it is a number without sign, fraction or exponent
  // that fits in 64 bits.
  bool as_u64(uint64_t* out) const;
};

// Parses one JSON value followed only by whitespace.
JsonValue parse_json(std::string_view json, const std::string& source);

// The writing side: s as a JSON string literal, in quotes, with " and \ escaped and control characters
// as \u00XX (bytes >= 0x80 pass through, so UTF-8 stays UTF-8). Every JSON the project writes quotes
// its strings with this.
std::string json_quote(std::string_view s);

}  // namespace gpt
