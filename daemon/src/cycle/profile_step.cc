// The op profile of a plan's first run (trainer-run --profile, CPU jobs): where an update
// spends its time, kept as a "profile" event and a Chrome trace. A failure is a warning, never
// the run's.
#include "cycle/cycle_steps.h"
#include "trainerd/daemon/state_layout.h"
#include "trainerd/trainer/spec/worker_protocol.h"

namespace trainerd::daemon {
namespace {

// Updates the op profile of a new plan measures (after one warm-up): a few seconds of a
// small job, a fraction of a large one's first update.
constexpr int kProfileUpdates = 3;

class ProfileStep : public CycleStep {
 public:
  const char* name() const override { return "profile"; }

  asio::awaitable<void> Run(CycleState& state, CycleContext& context) override {
    const std::int64_t run_id = state.current.run.id;
    if (IsValidated(state, context)) co_return;  // profiled when it first trained
    const std::string& device = state.active->spec.runtime.device;
    if (device != "cpu") {
      context.Record(run_id, "profile_skipped", store::Severity::kInfo,
                     "the op profile times ops on the host: a " + device + " plan is not profiled");
      co_return;
    }
    context.Progress("profiling", run_id);
    const StateLayout layout(context.config().state_dir);
    const std::string trace = layout.ProfileTrace(run_id);
    const std::vector<std::string> args = {"--plan",
                                           state.current.plan_path,
                                           "--profile",
                                           "--profile-updates",
                                           std::to_string(kProfileUpdates),
                                           "--profile-trace",
                                           trace};
    const std::string log_path = layout.RunLog(run_id);
    const CycleContext::ReportRun out =
        co_await context.RunReportMode(*state.active, state.window, args, log_path);
    if (!out.ok()) {
      context.Record(run_id, "profile_failed", store::Severity::kWarning,
                     "the op profile of the plan failed (training goes on): " + out.ErrorMessage());
      co_return;
    }
    std::string summary = "op profile of " + std::to_string(kProfileUpdates) + " updates: ";
    for (const ProfileReport::Group& g : Parse<ProfileReport>(out.report).groups) {
      if (g.share >= 0.05) summary += g.group + Format(" %.0f%%", 100 * g.share) + ", ";
    }
    context.Record(run_id, "profile", store::Severity::kInfo, summary + "trace " + trace,
                   out.report.dump());
  }
};

}  // namespace

std::unique_ptr<CycleStep> MakeProfileStep() { return std::make_unique<ProfileStep>(); }

}  // namespace trainerd::daemon
