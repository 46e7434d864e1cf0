// How the daemon starts a training worker as the ranks of a data-parallel job
// (distributed.ranks > 1, docs/distributed.md): its launcher in front of the worker's own
// command line. The launcher passes the daemon's signals on to every rank and ends when they
// all have; a rank's failure stops the others.
#pragma once

#include <string>
#include <vector>

#include "trainerd/common/status.h"
#include "trainerd/trainer/spec/job_spec.h"

namespace trainerd::daemon {

// `worker` unchanged for a one-rank job. Else, by distributed.launcher:
//   local:    trainer-launch --ranks N --stop-timeout T -- WORKER...
//   torchrun: torchrun --no_python PLACEMENT WORKER...
//   slurm:    srun --kill-on-bad-exit=1 PLACEMENT WORKER...
// where PLACEMENT is distributed.launcher_args, or by default `--standalone
// --nproc_per_node=N` (torchrun, one host) or `--ntasks=N` (srun, in the job's allocation).
// torchrun and srun are distributed.launcher_path, else found on `search_path` (PATH's
// syntax). NotFound names the program and the folders searched.
Result<std::vector<std::string>> RankLaunchCommand(const DistributedSpec& distributed,
                                                   const std::string& trainer_launch_path,
                                                   const std::vector<std::string>& worker,
                                                   const std::string& search_path);

// The first executable file `name` in the folders of `search_path`; NotFound otherwise.
Result<std::string> FindExecutable(const std::string& name, const std::string& search_path);

}  // namespace trainerd::daemon
