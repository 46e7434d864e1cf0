// YAML -> JobSpec. The only place job YAML is read. Every error names the file, the line,
// the dotted key and what was expected, e.g.
//   configs/default.yaml:7: model.n_head: expected an integer >= 1 that divides
//   model.n_embd (128), got 5
#pragma once

#include <string>

#include "trainerd/common/status.h"
#include "trainerd/trainer/spec/job_spec.h"

namespace trainerd {

// Reads and validates the YAML file at `path`. Relative data file paths are resolved
// against `base_dir`, by default the directory of `path`.
Result<JobSpec> ParseJobSpecFile(const std::string& path, const std::string& base_dir = "");

// Same, from text already in memory; `origin` names it in error messages and, unless
// `base_dir` is given, anchors relative data paths.
Result<JobSpec> ParseJobSpecText(const std::string& yaml_text, const std::string& origin,
                                 const std::string& base_dir = "");

// Replaces spec->plan with the plan in the YAML (or JSON) file at `path`: a mapping with the
// keys of the job spec's `plan:` section, validated against the job.
Status ApplyPlanFile(const std::string& path, JobSpec* spec);

}  // namespace trainerd
