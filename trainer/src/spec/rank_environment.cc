#include "trainerd/trainer/spec/rank_environment.h"

#include <cerrno>
#include <cstdlib>
#include <optional>

namespace trainerd {
namespace {

constexpr int kDefaultMasterPort = 29500;

// The integer value of `name` in [min, max]; nullopt when unset.
Result<std::optional<int>> IntVariable(const EnvironmentLookup& getenv, const char* name, int min,
                                       int max) {
  const char* text = getenv(name);
  if (text == nullptr) return std::optional<int>();
  char* end = nullptr;
  errno = 0;
  const long value = std::strtol(text, &end, 10);
  if (*text == '\0' || *end != '\0' || errno != 0 || value < min || value > max) {
    return Status::InvalidArgument(std::string(name) + "='" + text + "' is not an integer in [" +
                                   std::to_string(min) + ", " + std::to_string(max) + "]");
  }
  return std::optional<int>(static_cast<int>(value));
}

// Reads the rank, the world size and the local rank from the three variables named; every
// one must be set once the first is.
Status ReadRanks(const EnvironmentLookup& getenv, const char* rank_name, const char* world_name,
                 const char* local_name, RankEnvironment* env) {
  constexpr int kMaxRanks = 1 << 20;
  Result<std::optional<int>> rank = IntVariable(getenv, rank_name, 0, kMaxRanks);
  Result<std::optional<int>> world = IntVariable(getenv, world_name, 1, kMaxRanks);
  Result<std::optional<int>> local = IntVariable(getenv, local_name, 0, kMaxRanks);
  for (const auto* r : {&rank, &world, &local}) {
    if (!r->ok()) return r->status();
  }
  if (!world->has_value()) {
    return Status::InvalidArgument(std::string(rank_name) + " is set but " + world_name +
                                   " is not");
  }
  env->rank = **rank;
  env->world_size = **world;
  env->local_rank = local->value_or(0);
  if (env->rank >= env->world_size) {
    return Status::InvalidArgument(std::string(rank_name) + "=" + std::to_string(env->rank) +
                                   " is not below " + world_name + "=" +
                                   std::to_string(env->world_size));
  }
  return Status::Ok();
}

Status ReadMasterPort(const EnvironmentLookup& getenv, RankEnvironment* env) {
  Result<std::optional<int>> port = IntVariable(getenv, "MASTER_PORT", 1, 65535);
  if (!port.ok()) return port.status();
  env->master_port = port->value_or(kDefaultMasterPort);
  return Status::Ok();
}

}  // namespace

Result<std::string> FirstHostOfNodeList(const std::string& nodelist) {
  const std::string invalid = "SLURM node list '" + nodelist + "' is malformed";
  // The first host ends at the first comma outside brackets.
  const std::size_t bracket = nodelist.find('[');
  const std::size_t comma = nodelist.find(',');
  if (bracket == std::string::npos || (comma != std::string::npos && comma < bracket)) {
    const std::string host = nodelist.substr(0, comma);
    if (host.empty() || host.find(']') != std::string::npos) {
      return Status::InvalidArgument(invalid);
    }
    return host;
  }
  const std::size_t close = nodelist.find(']', bracket);
  if (bracket == 0 || close == std::string::npos) return Status::InvalidArgument(invalid);
  // "node[07-09,12]": the prefix and the first number of the range, zero padding kept.
  const std::string ranges = nodelist.substr(bracket + 1, close - bracket - 1);
  const std::string first = ranges.substr(0, ranges.find_first_of("-,"));
  if (first.empty() || first.find_first_not_of("0123456789") != std::string::npos) {
    return Status::InvalidArgument(invalid);
  }
  return nodelist.substr(0, bracket) + first;
}

Result<RankEnvironment> RankEnvironmentFrom(const EnvironmentLookup& getenv) {
  RankEnvironment env;
  if (getenv("RANK") != nullptr) {
    env.launcher = "torchrun";
    if (Status s = ReadRanks(getenv, "RANK", "WORLD_SIZE", "LOCAL_RANK", &env); !s.ok()) return s;
    const char* addr = getenv("MASTER_ADDR");
    if (addr == nullptr || *addr == '\0') {
      return Status::InvalidArgument("RANK is set but MASTER_ADDR is not");
    }
    env.master_addr = addr;
    if (Status s = ReadMasterPort(getenv, &env); !s.ok()) return s;
    Result<std::optional<int>> local_world = IntVariable(getenv, "LOCAL_WORLD_SIZE", 1, 1 << 20);
    if (!local_world.ok()) return local_world.status();
    env.local_world_size = local_world->value_or(1);
    const char* agent_store = getenv("TORCHELASTIC_USE_AGENT_STORE");
    env.launcher_serves_store = agent_store != nullptr && std::string(agent_store) == "True";
    if (env.launcher_serves_store) {
      const char* restart = getenv("TORCHELASTIC_RESTART_COUNT");
      env.store_prefix = std::string("trainerd/attempt_") + (restart ? restart : "0");
    }
    return env;
  }
  if (getenv("SLURM_PROCID") != nullptr) {
    env.launcher = "slurm";
    if (Status s = ReadRanks(getenv, "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", &env);
        !s.ok()) {
      return s;
    }
    const char* nodes = getenv("SLURM_JOB_NODELIST");
    if (nodes == nullptr) nodes = getenv("SLURM_NODELIST");
    if (nodes == nullptr) {
      return Status::InvalidArgument(
          "SLURM_PROCID is set but neither SLURM_JOB_NODELIST nor "
          "SLURM_NODELIST is");
    }
    Result<std::string> master = FirstHostOfNodeList(nodes);
    if (!master.ok()) return master.status();
    env.master_addr = *master;
    if (Status s = ReadMasterPort(getenv, &env); !s.ok()) return s;
    return env;
  }
  return env;
}

}  // namespace trainerd
