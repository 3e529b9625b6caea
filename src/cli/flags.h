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
  std::string str(const std::string& name, const std::string& def);
  std::string required(const std::string& name);
  int64_t i64(const std::string& name, int64_t def, int64_t lo, int64_t hi);
  int i32(const std::string& name, int def, int lo, int hi) { return (int)i64(name, def, lo, hi); }
  double f64(const std::string& name, double def, double lo, double hi);
  bool on(const std::string& name);  // a switch
  // Throws on any flag that no accessor asked for.
  void finish() const;

 private:
  std::string cmd_;
  std::map<std::string, std::string> vals_;
  std::set<std::string> used_;
  bool help_ = false;
};

}  // namespace gpt
