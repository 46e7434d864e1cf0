// The cycle's first step: which config version runs tonight (the job file's, recorded as a
// candidate; or, when it is unreadable, invalid or marked bad, the last known-good one),
// whether the worker speaks this daemon's protocol and which trainer and LibTorch it runs
// (validated plans are keyed by them), and the hardware the runs are recorded against. Any
// of them failing ends the cycle before a run is recorded.
#include "cycle/cycle_steps.h"
#include "trainerd/common/sha256.h"
#include "trainerd/daemon/host_fingerprint.h"
#include "trainerd/daemon/state_layout.h"
#include "trainerd/trainer/spec/job_spec_parser.h"
#include "trainerd/trainer/spec/worker_protocol.h"

namespace trainerd::daemon {
namespace {

class ResolveStep : public CycleStep {
 public:
  const char* name() const override { return "resolve"; }

  asio::awaitable<void> Run(CycleState& state, CycleContext& context) override {
    context.Progress("resolving config");
    Result<ActiveConfig> active = Resolve(context);
    if (!active.ok()) {
      state.failure = active.status().message();
      co_return;
    }
    Result<store::SoftwareFingerprint> software = co_await DescribeWorker(state, context);
    if (!software.ok()) {
      context.Record(std::nullopt, "worker_protocol_mismatch", store::Severity::kError,
                     software.status().message());
      state.failure = software.status().message();
      co_return;
    }
    state.software = *std::move(software);
    state.hardware = co_await DescribeHardware(*active, state, context);
    state.active = std::move(*active);
  }

 private:
  static Result<ActiveConfig> Resolve(CycleContext& context) {
    const DaemonConfig& config = context.config();
    store::Store& store = context.store();
    const double now = context.clock().Now();
    std::string reason;
    std::string failed_hash;
    Result<std::string> text = context.files().Read(config.job_path);
    if (!text.ok()) {
      reason = text.status().message() + " (the job spec)";
      context.Record(std::nullopt, "config_unreadable", store::Severity::kError, reason);
    } else {
      store::ConfigVersion seen{Sha256Hex(*text), *text, now, store::ConfigState::kCandidate};
      Result<store::ConfigVersion> version = store.RecordConfigVersion(seen);
      if (!version.ok()) return version.status();
      failed_hash = version->hash;
      const std::string details = nlohmann::json{{"config_hash", version->hash}}.dump();
      if (version->first_seen == now) {
        context.Record(std::nullopt, "config_candidate", store::Severity::kInfo,
                       "new config version " + Short(version->hash) + " of " + config.job_path,
                       details);
      }
      Result<JobSpec> spec = ParseJobSpecText(version->yaml, config.job_path);
      if (!spec.ok()) {
        reason = "invalid job spec: " + spec.status().message();
        if (version->state != store::ConfigState::kBad) {
          context.RecordIfFailed(
              std::nullopt,
              store.SetConfigState({version->hash, store::ConfigState::kBad, reason, now}));
        }
        context.Record(std::nullopt, "config_invalid", store::Severity::kError, reason, details);
      } else if (version->state == store::ConfigState::kBad) {
        reason = "config version " + Short(version->hash) + " is marked bad";
        context.Record(std::nullopt, "config_bad_skipped", store::Severity::kWarning, reason,
                       details);
      } else {
        return LoadConfigVersion(context, version->hash);
      }
    }
    Result<std::optional<store::ConfigVersion>> known_good = store.LastKnownGoodConfig();
    if (!known_good.ok()) return known_good.status();
    if (!*known_good) {
      return Status::FailedPrecondition(reason + "; no known-good config version to fall back to");
    }
    if (context.metrics()) context.metrics()->Rollback("invalid_config");
    context.Record(
        std::nullopt, "rollback", store::Severity::kWarning,
        reason + "; running the last known-good version " + Short((*known_good)->hash),
        nlohmann::json{{"from", failed_hash},
                       {"to", (*known_good)->hash},
                       {"reason", failed_hash.empty() ? "unreadable_config" : "invalid_config"}}
            .dump());
    return LoadConfigVersion(context, (*known_good)->hash);
  }

  // `trainer-run --version --json`: a worker of another trainerd release would print (or
  // read) the protocol's events differently, and is refused before anything runs; else the
  // trainer and LibTorch it runs, which validated plans are keyed by.
  static asio::awaitable<Result<store::SoftwareFingerprint>> DescribeWorker(const CycleState& state,
                                                                            CycleContext& context) {
    const std::vector<std::string> argv = {context.config().worker_path, "--version", "--json"};
    const std::string log_path = StateLayout(context.config().state_dir).DeviceInfoLog();
    const LaunchSpec launch{argv, log_path};
    const WorkerSupervisor::Limits limits = context.Limits(state.window);
    std::string printed;
    const std::function<void(const std::string&)> keep = [&](const std::string& line) {
      if (printed.empty()) printed = line;
    };
    const Result<ProcessExit> exit = co_await context.supervisor().Run(launch, limits, keep);
    const nlohmann::json json = nlohmann::json::parse(printed, nullptr, false);
    const bool reported = exit.ok() && exit->exited && exit->code == 0 && json.is_object() &&
                          json.contains("protocol_version");
    const VersionReport report = reported ? Parse<VersionReport>(json) : VersionReport{};
    if (reported && report.protocol_version == kWorkerProtocolVersion) {
      co_return store::SoftwareFingerprint{report.trainer_version, report.software.torch_version,
                                           report.software.blas, report.software.compiler};
    }
    co_return Status::FailedPrecondition(
        "the worker " + context.config().worker_path + " speaks worker protocol " +
        (reported ? std::to_string(report.protocol_version)
                  : std::string("(none it would say: ") +
                        (exit.ok() ? exit->Describe() : exit.status().message()) + ")") +
        ", this trainerd speaks " + std::to_string(kWorkerProtocolVersion) +
        ": install the trainer-run of the same trainerd release (daemon.worker)");
  }

  // The fingerprint runs of `active` are recorded and looked up under: the host's, with a
  // GPU's name and memory from the worker (--device-info) when the job trains on one.
  static asio::awaitable<store::HardwareFingerprint> DescribeHardware(const ActiveConfig& active,
                                                                      const CycleState& state,
                                                                      CycleContext& context) {
    store::HardwareFingerprint hardware = HostHardware(active.spec.runtime.device);
    if (hardware.device == "cpu") co_return hardware;  // the host's own memory
    const std::vector<std::string> args = {"--device-info"};
    const std::string log_path = StateLayout(context.config().state_dir).DeviceInfoLog();
    const CycleContext::ReportRun out =
        co_await context.RunReportMode(active, state.window, args, log_path);
    if (!out.ok() || !ApplyDeviceDescription(out.report, &hardware)) {
      context.Record(std::nullopt, "device_unknown", store::Severity::kWarning,
                     "the worker could not describe device " + hardware.device + " (" + log_path +
                         "): runs are recorded against \"" + hardware.device +
                         "\" with unknown memory",
                     out.error ? ToJson(WorkerEvent(*out.error)).dump() : "{}");
    }
    co_return hardware;
  }
};

}  // namespace

std::unique_ptr<CycleStep> MakeResolveStep() { return std::make_unique<ResolveStep>(); }

Result<ActiveConfig> LoadConfigVersion(CycleContext& context, const std::string& hash) {
  Result<store::ConfigVersion> version = context.store().GetConfigVersion(hash);
  if (!version.ok()) return version.status();
  Result<JobSpec> spec = ParseJobSpecText(version->yaml, context.config().job_path);
  if (!spec.ok()) return spec.status();
  const std::string path = StateLayout(context.config().state_dir).ConfigCopy(hash);
  if (Status s = context.files().WriteAtomically(path, version->yaml); !s.ok()) return s;
  if (context.metrics()) {
    context.metrics()->Budget(spec->memory.budget_bytes, spec->memory.usable_bytes());
  }
  return ActiveConfig{*version, *spec, path};
}

}  // namespace trainerd::daemon
