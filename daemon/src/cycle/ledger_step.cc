// The memory ledger of the attempt's plan (trainer-run --ledger): bytes by category at the
// measured peak, into the run record; a plan whose measured peak exceeds the usable budget
// is refused before anything trains it. A ledger that cannot be measured refuses nothing.
#include "cycle/cycle_steps.h"
#include "trainerd/daemon/state_layout.h"
#include "trainerd/trainer/spec/worker_protocol.h"

namespace trainerd::daemon {
namespace {

class LedgerStep : public CycleStep {
 public:
  const char* name() const override { return "ledger"; }

  asio::awaitable<void> Run(CycleState& state, CycleContext& context) override {
    AttemptState& a = state.current;
    context.Progress("measuring ledger", a.run.id);
    const std::vector<std::string> args = {"--plan", a.plan_path, "--ledger"};
    const std::string log_path = StateLayout(context.config().state_dir).RunLog(a.run.id);
    const CycleContext::ReportRun out =
        co_await context.RunReportMode(*state.active, state.window, args, log_path);
    if (!out.ok()) {
      context.Record(a.run.id, "ledger_failed", store::Severity::kWarning,
                     "the memory ledger could not be measured (" +
                         (out.exit.ok() ? out.exit->Describe() : out.exit.status().message()) +
                         "); the run record keeps only the measured peak");
      co_return;
    }
    const MemoryLedger ledger = Parse<MemoryLedger>(out.report);
    store::MemoryByCategory m;
    m.parameters = ledger.parameters_bytes;
    m.gradients = ledger.gradients_bytes;
    m.optimizer_state = ledger.optimizer_state_bytes;
    m.activations = ledger.activations_bytes + ledger.output_layer_bytes;  // the store's coarser
    m.temporaries = ledger.temporaries_bytes;
    m.inputs = ledger.inputs_bytes;
    m.peak = ledger.peak_bytes;
    if (out.report.contains("blocks")) {
      context.counted_blocks()[state.active->version.hash] = static_cast<int>(ledger.blocks.size());
    }
    context.Record(
        a.run.id, "ledger",
        m.peak > ledger.usable_bytes ? store::Severity::kWarning : store::Severity::kInfo,
        Format("ledger peak %.1f MiB against %.1f MiB usable", m.peak / 1048576.0,
               ledger.usable_bytes / 1048576.0),
        out.report.dump());
    a.ledger = {m, ledger.usable_bytes};
    a.run.peak_memory = m;
    RefuseOverBudget(a, context);
  }

 private:
  static void RefuseOverBudget(AttemptState& a, CycleContext& context) {
    const LedgerFigures& ledger = a.ledger;
    if (ledger.usable_bytes <= 0 || ledger.memory->peak <= ledger.usable_bytes) return;
    const std::string message =
        DescribeAttemptPlan(a.attempt) +
        Format(" refused before training: its ledger peak %.1f MiB exceeds the %.1f MiB usable",
               ledger.memory->peak / 1048576.0, ledger.usable_bytes / 1048576.0);
    context.Record(a.run.id, "plan_over_budget", store::Severity::kWarning, message,
                   nlohmann::json{{"peak_bytes", ledger.memory->peak},
                                  {"usable_bytes", ledger.usable_bytes},
                                  {"source", std::string(ToString(a.attempt.source))},
                                  {"plan", ToJson(a.attempt.plan)}}
                       .dump());
    a.end = AttemptEnd{AttemptOutcome::kRejected, message};
  }
};

}  // namespace

std::unique_ptr<CycleStep> MakeLedgerStep() { return std::make_unique<LedgerStep>(); }

}  // namespace trainerd::daemon
