// Where a worker process stands in a data-parallel job, read from the environment its
// launcher gives it: torchrun's (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT; also
// what trainer-launch sets; LOCAL_WORLD_SIZE when set) or, without RANK, Slurm's (SLURM_PROCID,
// SLURM_NTASKS, SLURM_LOCALID, and the first host of SLURM_JOB_NODELIST or SLURM_NODELIST as the
// master; MASTER_PORT when set, else 29500). Neither: a one-process job. No torch.
#pragma once

#include <functional>
#include <string>

#include "trainerd/common/status.h"

namespace trainerd {

struct RankEnvironment {
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;  // the rank among this host's ranks: the GPU it uses
  // Ranks on this host sharing its CPUs: LOCAL_WORLD_SIZE (torchrun, trainer-launch); 1 under
  // Slurm, whose tasks each get their own CPUs (their affinity mask).
  int local_world_size = 1;
  std::string master_addr = "127.0.0.1";
  int master_port = 29500;  // torchrun's and Slurm conventions' default
  std::string launcher;     // "torchrun" (RANK set), "slurm" (SLURM_PROCID set) or "" (neither)
  // torchrun's agent already serves a store at MASTER_ADDR:MASTER_PORT
  // (TORCHELASTIC_USE_AGENT_STORE=True): every rank joins it as a client, its keys under
  // store_prefix (one per restart, TORCHELASTIC_RESTART_COUNT). Else rank 0 serves it.
  bool launcher_serves_store = false;
  std::string store_prefix;
};

// `getenv` returns a variable's value or nullptr (::getenv in production). Errors are
// InvalidArgument and name the variable and its value: "RANK='x' is not an integer",
// "RANK=2 is not below WORLD_SIZE=2", "MASTER_ADDR is not set".
using EnvironmentLookup = std::function<const char*(const char*)>;
Result<RankEnvironment> RankEnvironmentFrom(const EnvironmentLookup& getenv);

// The first host of a Slurm node list: "node[07-09,12],gpu1" -> "node07", "a,b" -> "a".
// InvalidArgument for an empty or malformed list.
Result<std::string> FirstHostOfNodeList(const std::string& nodelist);

}  // namespace trainerd
