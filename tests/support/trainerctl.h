// The real trainerctl as a child process, for the tests of the executables that define
// TRAINERCTL_PATH: its exit code, its standard output (lines joined by newlines) and error.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "child_process.h"

namespace trainerd::testing {

struct Ctl {
  int code = -1;
  std::string out;
  std::string err;
  nlohmann::json json() const { return nlohmann::json::parse(out, nullptr, false); }
};

// trainerctl ARGS..., nothing added.
inline Ctl RunTrainerctl(const std::vector<std::string>& args) {
  std::vector<std::string> argv = {TRAINERCTL_PATH};
  argv.insert(argv.end(), args.begin(), args.end());
  ChildProcess ctl(argv);
  Ctl result;
  for (const std::string& line : ctl.ReadAllLines()) result.out += line + "\n";
  result.err = ctl.ReadAllStderr();
  result.code = ctl.ExitCode();
  return result;
}

}  // namespace trainerd::testing
