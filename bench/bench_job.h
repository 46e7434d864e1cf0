// What the trainer benchmark drivers share: the job spec file they run and the data it names,
// loaded with the errors a driver exits on.
#pragma once

#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "trainerd/trainer/data/dataset.h"
#include "trainerd/trainer/spec/job_spec_parser.h"

namespace bench {

struct Job {
  trainerd::JobSpec spec;
  std::unique_ptr<trainerd::Dataset> corpus;
};

// `config` parsed and the corpus it names loaded. On an error it says why on stderr and sets
// *exit_code: 2 for the config, 3 for the data.
inline std::optional<Job> LoadJob(const std::string& config, int* exit_code) {
  trainerd::Result<trainerd::JobSpec> spec = trainerd::ParseJobSpecFile(config);
  if (!spec.ok()) {
    std::cerr << spec.status().message() << "\n";
    *exit_code = 2;
    return std::nullopt;
  }
  trainerd::Result<std::unique_ptr<trainerd::Dataset>> corpus =
      trainerd::LoadDataset(spec->data, spec->model.block_size, "");
  if (!corpus.ok()) {
    std::cerr << corpus.status().message() << "\n";
    *exit_code = 3;
    return std::nullopt;
  }
  return Job{std::move(spec).value(), std::move(*corpus)};
}

}  // namespace bench
