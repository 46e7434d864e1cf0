// The attempts' ladder, applied in one place: the first attempt of a config version, and after
// a failed attempt the policy's decision (DecideFallback, policy.h) carried out: its events
// and metrics, the failed config marked bad, a rolled-back version loaded.
#pragma once

#include <optional>
#include <vector>

#include "trainerd/daemon/cycle_step.h"

namespace trainerd::daemon {

// The first attempt of state.active on this hardware and worker: its last validated plan,
// else the job's own plan, else the planner.
Result<Attempt> FirstAttempt(const CycleState& state, CycleContext& context);

// After the current attempt failed with an outcome that calls for a fallback: the next
// attempt, or none (the ladder, the attempts or the time ran out, the daemon was stopped, or
// the store could not answer). May replace state.active with a rolled-back version.
std::optional<Attempt> NextAttempt(CycleState& state, CycleContext& context,
                                   const std::vector<Attempt>& tried);

}  // namespace trainerd::daemon
