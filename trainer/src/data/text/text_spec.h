// The keys of text data (data.format: text, the default): byte tokens from text files, one
// evaluation slice per file, the tail of each held out. Torch-free: the job spec reads them.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "trainerd/trainer/spec/job_spec.h"

namespace trainerd {

struct TextDataKeys {
  // One slice each, named by file name, absolute after parsing. Symlinks to one file count once.
  std::vector<std::string> files;
  double holdout_fraction = 0.1;  // tail of each file held out for evaluation, (0, 0.5]
};
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(TextDataKeys, files, holdout_fraction)

// The data: section of text data of `keys`, as the parser would read it: jobs built in code
// (tests, benchmarks) start from it.
DataSpec TextDataSpec(const TextDataKeys& keys);

}  // namespace trainerd
