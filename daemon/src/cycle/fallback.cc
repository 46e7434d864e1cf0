#include "cycle/fallback.h"

#include "cycle/cycle_steps.h"

namespace trainerd::daemon {

Result<Attempt> FirstAttempt(const CycleState& state, CycleContext& context) {
  const ActiveConfig& config = *state.active;
  Result<std::optional<PlanSpec>> validated =
      context.store().LastValidatedPlan(config.version.hash, state.hardware, state.software);
  if (!validated.ok()) return validated.status();
  Attempt attempt{
      config.version.hash, FirstPlanSource(validated->has_value(), config.spec.plan_given), {}};
  if (attempt.source == PlanSource::kValidated) attempt.plan = **validated;
  if (attempt.source == PlanSource::kConfig) attempt.plan = config.spec.plan;
  return attempt;
}

std::optional<Attempt> NextAttempt(CycleState& state, CycleContext& context,
                                   const std::vector<Attempt>& tried) {
  const ActiveConfig& active = *state.active;
  const AttemptState& failed = state.current;
  const AttemptOutcome outcome = failed.end->outcome;
  store::Store& store = context.store();
  Result<std::optional<store::ConfigVersion>> known_good = store.LastKnownGoodConfig();
  Result<std::optional<PlanSpec>> validated =
      store.LastValidatedPlan(active.version.hash, state.hardware, state.software);
  Result<store::ConfigVersion> current = store.GetConfigVersion(active.version.hash);
  if (!known_good.ok() || !validated.ok() || !current.ok()) return std::nullopt;
  FallbackInput input;
  input.outcome = outcome;
  input.tried = tried;
  input.config_state = current->state;
  if (*known_good) input.known_good_hash = (*known_good)->hash;
  input.validated_plan = *validated;
  input.baseline_plan = NamedBaselinePlan(active.spec.training.effective_batch,
                                          context.BlocksOf(active.spec, active.version.hash));
  if (MayKeepStateOnTheHost(active.spec)) {
    input.baseline_on_host = input.baseline_plan;
    input.baseline_on_host->optimizer_state = StatePlacement::kHost;
  }
  input.max_attempts = context.config().max_attempts;
  input.seconds_left = context.Limits(state.window).sigterm_at - context.clock().Now();
  const FallbackDecision decision = DecideFallback(input);
  const std::int64_t run_id = failed.run.id;
  if (decision.mark_config_bad) {
    context.RecordIfFailed(run_id,
                           store.SetConfigState({active.version.hash, store::ConfigState::kBad,
                                                 decision.reason, context.clock().Now(), run_id}));
  }
  if (DaemonMetrics* metrics = context.metrics()) {
    if (decision.retry) metrics->Fallback(ToString(outcome));
    if (decision.rolled_back) metrics->Rollback(ToString(outcome));
  }
  if (decision.rolled_back) {
    context.Record(run_id, "rollback", store::Severity::kWarning, decision.reason,
                   nlohmann::json{{"from", active.version.hash},
                                  {"to", decision.config_hash},
                                  {"reason", std::string(ToString(outcome))}}
                       .dump());
  }
  context.Record(run_id, decision.retry ? "fallback" : "fallback_exhausted",
                 decision.retry ? store::Severity::kWarning : store::Severity::kError,
                 decision.reason,
                 nlohmann::json{{"failed_run", run_id},
                                {"reason", std::string(ToString(outcome))},
                                {"retry", decision.retry},
                                {"config_hash", decision.config_hash},
                                {"plan_source", std::string(ToString(decision.source))},
                                {"rolled_back", decision.rolled_back},
                                {"mark_config_bad", decision.mark_config_bad}}
                     .dump());
  if (!decision.retry || context.supervisor().stopped_by() != WorkerExit::StoppedBy::kNobody) {
    return std::nullopt;
  }
  if (!decision.rolled_back) {
    return Attempt{decision.config_hash, decision.source, decision.plan.value_or(PlanSpec{})};
  }
  Result<ActiveConfig> rolled_back = LoadConfigVersion(context, decision.config_hash);
  if (!rolled_back.ok()) {
    context.Record(run_id, "cycle_failed", store::Severity::kError, rolled_back.status().message());
    return std::nullopt;
  }
  state.active = std::move(*rolled_back);
  Result<Attempt> first = FirstAttempt(state, context);
  if (!first.ok()) return std::nullopt;
  return *first;
}

}  // namespace trainerd::daemon
