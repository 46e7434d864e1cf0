// A job small enough to train in well under a second per dozen updates: a 2-block GPT of
// width 32 over two real licence texts shipped by Debian's base-files, as YAML for tests of
// the executables (trainer-run, trainerd). tiny_job_spec.h builds the same job in code.
#pragma once

#include <sstream>
#include <string>

namespace trainerd::testing {

inline const char* kLicenceDir = "/usr/share/common-licenses";

// The job as YAML. The defaults are the daemon tests'; TinyGptYaml(updates) is the
// trainer-run tests' job. In a few dozen updates it learns too little to beat the simple
// baseline of the release gate (its eval loss stays above the licences' byte frequencies), so
// the daemon tests that are not about that test turn it off (regression.beat_baseline).
struct TinyGptYamlOptions {
  int updates = 30;
  int eval_interval = 10;
  int checkpoint_interval = 10;
  double lr = 3e-3;
  double min_lr = 1e-6;
  bool fix_blas_core = true;  // runtime.fix_blas_core
  std::string extra;          // more top-level YAML (plan:, memory:)
};

inline std::string TinyGptYaml(const TinyGptYamlOptions& o) {
  std::ostringstream yaml;
  yaml << "model: {kind: gpt, n_layer: 2, n_head: 2, n_embd: 32, block_size: 32}\n"
       << "data:\n  files: [" << kLicenceDir << "/GPL-3, " << kLicenceDir << "/Apache-2.0]\n"
       << "  eval_windows_per_slice: 4\n"
       << "optimizer: {lr: " << o.lr << "}\n"
       << "schedule: {warmup_updates: 3, min_lr: " << o.min_lr << "}\n"
       << "training: {effective_batch: 8, updates: " << o.updates
       << ", seed: 7, eval_interval: " << o.eval_interval
       << ", checkpoint_interval: " << o.checkpoint_interval << "}\n"
       << "runtime: {threads: 1" << (o.fix_blas_core ? "" : ", fix_blas_core: false") << "}\n"
       << o.extra;
  return yaml.str();
}

inline std::string TinyGptYaml(int updates) {
  TinyGptYamlOptions options;
  options.updates = updates;
  options.eval_interval = 5;
  options.checkpoint_interval = 5;
  options.min_lr = 3e-4;
  return TinyGptYaml(options);
}

}  // namespace trainerd::testing
