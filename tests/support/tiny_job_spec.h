// The tiny job of tiny_job.h built in code, for tests of the trainer's parts. White-box: it
// reaches the GPT's and the text format's keys (trainerd::trainer_internals).
#pragma once

#include <string>

#include "data/text/text_spec.h"
#include "models/gpt/gpt_spec.h"
#include "tiny_job.h"
#include "trainerd/trainer/spec/job_spec.h"

namespace trainerd::testing {

inline JobSpec TinyGptJob() {
  JobSpec spec;
  spec.source_path = "tiny";
  GptOptions gpt;
  gpt.n_layer = 2;
  gpt.n_head = 2;
  gpt.n_embd = 32;
  gpt.block_size = 32;
  spec.model = GptModelSpec(gpt);
  spec.data = TextDataSpec(
      {{std::string(kLicenceDir) + "/GPL-3", std::string(kLicenceDir) + "/Apache-2.0"}});
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

}  // namespace trainerd::testing
