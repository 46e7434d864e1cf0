// The cycle's last step: the report page of every run of the cycle (reports/run-<id>.html),
// once its chain of attempts is complete. A failure is a warning event, never the cycle's.
#include "cycle/cycle_steps.h"
#include "trainerd/daemon/log.h"
#include "trainerd/daemon/run_report.h"
#include "trainerd/daemon/state_layout.h"

namespace trainerd::daemon {
namespace {

class ReportStep : public CycleStep {
 public:
  const char* name() const override { return "report"; }

  asio::awaitable<void> Run(CycleState& state, CycleContext& context) override {
    const StateLayout layout(context.config().state_dir);
    for (const std::int64_t id : state.run_ids) {
      const std::string path = layout.RunReport(id);
      if (Status s = WriteRunReport(context.store(), id, context.clock().Now(), path); !s.ok()) {
        context.Record(id, "report_failed", store::Severity::kWarning,
                       "the run report could not be written: " + s.message());
      } else {
        Log(LogPriority::kInfo, "report: " + path, {id, ""});
      }
    }
    co_return;
  }
};

}  // namespace

std::unique_ptr<CycleStep> MakeReportStep() { return std::make_unique<ReportStep>(); }

}  // namespace trainerd::daemon
