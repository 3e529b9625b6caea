// A small strict command-line parser: "--name value" pairs, "-B 4" short forms, and boolean switches.
// Every value is validated (full-string number parse, range), every unknown flag is an error naming the
// command, and a flag given twice is an error. Messages are one line and name the flag.
#pragma once
#include <cstdint>
#include <map>
#include <set>
#include <string>

namespace gpt {

class Flags {
 public:
  // switches: names that take no value (e.g. {"--resume", "--no-sync"}).
  Flags(const std::string& command, int argc, char** argv, const std::set<std::string>& switches);

  bool has(const std::string& name) const;
  bool help() const { return help_; }
  std::string str(const std::string& name, const std::string& def);   // a given value must not be empty
  std::string text(const std::string& name, const std::string& def);  // free text: may be empty
  std::string required(const std::string& name);
  int64_t i64(const std::string& name, int64_t def, int64_t lo, int64_t hi);
  int i32(const std::string& name, int def, int lo, int hi) { return (int)i64(name, def, lo, hi); }
  double f64(const std::string& name, double def, double lo, double hi);
  bool on(const std::string& name);  // a switch
  // Throws on any flag that no accessor asked for.
  void finish() const;

 private:
  std::string cmd_;
  // The flag's value when given, or nullptr; marks the flag as known and rejects one given with no value.
  const std::string* given(const std::string& name);

  std::map<std::string, std::string> vals_;
  std::set<std::string> missing_value_;  // flags that ended the command line without a value
  std::set<std::string> used_;
  bool help_ = false;
};

// An output file flag's checks before any work: not a directory, and not the input file itself (the write
// would replace what is being read).
void check_output_file(const std::string& flag, const std::string& path, const std::string& input_flag,
                       const std::string& input);

}  // namespace gpt
