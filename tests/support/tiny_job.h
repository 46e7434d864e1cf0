// A job small enough to train in well under a second per dozen updates: a 2-block GPT of
// width 32 over two real licence texts shipped by Debian's base-files.
#pragma once

#include <string>

#include "trainerd/trainer/job_spec.h"

namespace trainerd::testing {

inline const char* kLicenceDir = "/usr/share/common-licenses";

inline JobSpec TinyGptJob() {
  JobSpec spec;
  spec.source_path = "tiny";
  spec.model.kind = ModelKind::kGpt;
  spec.model.gpt.n_layer = 2;
  spec.model.gpt.n_head = 2;
  spec.model.gpt.n_embd = 32;
  spec.model.gpt.block_size = 32;
  spec.data.files = {std::string(kLicenceDir) + "/GPL-3", std::string(kLicenceDir) + "/Apache-2.0"};
  spec.data.eval_windows_per_slice = 4;
  spec.optimizer.lr = 3e-3;
  spec.schedule.warmup_updates = 3;
  spec.schedule.min_lr = 3e-4;
  spec.training.effective_batch = 8;
  spec.training.updates = 30;
  spec.training.seed = 7;
  spec.training.eval_interval = 1000;
  spec.training.checkpoint_interval = 1000;
  spec.plan.microbatch = 8;
  spec.plan.accumulation_steps = 1;
  spec.runtime.threads = 1;
  return spec;
}

// The same job as YAML, for tests of the trainer-run executable.
inline std::string TinyGptYaml(int updates) {
  return std::string(R"(model: {kind: gpt, n_layer: 2, n_head: 2, n_embd: 32, block_size: 32}
data:
  files: [)") +
         kLicenceDir + "/GPL-3, " + kLicenceDir + R"(/Apache-2.0]
  eval_windows_per_slice: 4
optimizer: {lr: 3.0e-3}
schedule: {warmup_updates: 3, min_lr: 3.0e-4}
training: {effective_batch: 8, updates: )" +
         std::to_string(updates) + R"(, seed: 7, eval_interval: 5, checkpoint_interval: 5}
runtime: {threads: 1}
)";
}

}  // namespace trainerd::testing
