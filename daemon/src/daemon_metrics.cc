#include "trainerd/daemon/daemon_metrics.h"

#include <prometheus/counter.h>
#include <prometheus/exposer.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>

#include <exception>
#include <nlohmann/json.hpp>
#include <sstream>
#include <tuple>
#include <vector>

namespace trainerd::daemon {

namespace {

using prometheus::BuildCounter;
using prometheus::BuildGauge;
using prometheus::Counter;
using prometheus::Family;
using prometheus::Gauge;

// Every final run status (store::RunStatus) and every AttemptOutcome that calls for a
// fallback (policy.h), so that each series exists at 0 from the start.
constexpr std::string_view kOutcomes[] = {"succeeded", "oom",         "crashed",   "leak",
                                          "deadline",  "regressed",   "cancelled", "interrupted",
                                          "rejected",  "data_quality"};
constexpr std::string_view kFallbackReasons[] = {"oom", "crash", "leak", "rejected"};
constexpr std::string_view kRollbackReasons[] = {
    "oom",        "crash",          "leak",     "rejected",
    "regression", "invalid_config", "operator", "outcome_regression"};

// Outcome series per release and the longest slice name exported: a judged metric on slices
// the config leaves open could otherwise bring any number of label values of any length.
constexpr int kMaxOutcomeSeries = 100;
constexpr std::size_t kMaxOutcomeLabelBytes = 128;

// Registers a family and records its name in `names`.
Family<Gauge>& GaugeFamily(prometheus::Registry& registry, std::vector<std::string>& names,
                           const std::string& name, const std::string& help) {
  names.push_back(name);
  return BuildGauge().Name(name).Help(help).Register(registry);
}

Family<Counter>& CounterFamily(prometheus::Registry& registry, std::vector<std::string>& names,
                               const std::string& name, const std::string& help) {
  names.push_back(name);
  return BuildCounter().Name(name).Help(help).Register(registry);
}

}  // namespace

struct DaemonMetrics::Families {
  std::shared_ptr<prometheus::Registry> registry = std::make_shared<prometheus::Registry>();
  std::vector<std::string> names;  // of the families below, in registration order
  Family<Gauge>& build_info = GaugeFamily(*registry, names, "trainerd_build_info",
                                          "trainerd's version, as a label; always 1");
  Family<Counter>& runs = CounterFamily(*registry, names, "trainerd_runs_total",
                                        "Runs that ended, by outcome (the run's status)");
  Family<Gauge>& in_progress =
      GaugeFamily(*registry, names, "trainerd_run_in_progress", "1 while a worker attempt runs");
  Family<Gauge>& last_success =
      GaugeFamily(*registry, names, "trainerd_last_success_timestamp_seconds",
                  "End of the last succeeded run, Unix seconds");
  Family<Gauge>& duration = GaugeFamily(*registry, names, "trainerd_run_duration_seconds",
                                        "Wall time of the last finished run");
  Family<Gauge>& margin = GaugeFamily(
      *registry, names, "trainerd_window_margin_seconds",
      "Deadline minus the predicted finish (during a run) or the actual end (after one)");
  Family<Gauge>& samples = GaugeFamily(*registry, names, "trainerd_train_samples_per_second",
                                       "Training throughput of the last finished run");
  Family<Gauge>& world_size =
      GaugeFamily(*registry, names, "trainerd_train_world_size",
                  "Ranks that trained the last finished run (distributed.ranks); the "
                  "throughput is the whole job's");
  Family<Gauge>& train_loss = GaugeFamily(*registry, names, "trainerd_train_loss",
                                          "Training loss of the last run's last update");
  Family<Gauge>& eval_loss = GaugeFamily(*registry, names, "trainerd_eval_loss",
                                         "Final held-out loss of the last run, by data slice");
  // The peak and its parts are separate series: a sum() over the ledger is its total, and
  // never counts the peak in.
  Family<Gauge>& peak = GaugeFamily(*registry, names, "trainerd_memory_peak_bytes",
                                    "Measured peak device memory of the last run");
  Family<Gauge>& ledger = GaugeFamily(*registry, names, "trainerd_memory_ledger_bytes",
                                      "Last run's memory ledger, by category");
  Family<Gauge>& budget = GaugeFamily(*registry, names, "trainerd_memory_budget_bytes",
                                      "The job's device memory budget");
  Family<Gauge>& usable = GaugeFamily(*registry, names, "trainerd_memory_usable_bytes",
                                      "The budget less its reserve: the training limit");
  Family<Gauge>& mfu = GaugeFamily(*registry, names, "trainerd_mfu_ratio",
                                   "Model FLOP utilization of the last run, 0-1");
  Family<Gauge>& cost = GaugeFamily(*registry, names, "trainerd_cost_per_sample",
                                    "Device cost per trained sample of the last run");
  Family<Counter>& ooms =
      CounterFamily(*registry, names, "trainerd_ooms_total", "Runs that ran out of device memory");
  Family<Counter>& fallbacks = CounterFamily(*registry, names, "trainerd_fallbacks_total",
                                             "Retries with a fallback plan or config, by cause");
  Family<Counter>& rollbacks = CounterFamily(*registry, names, "trainerd_rollbacks_total",
                                             "Active config rolled back to known-good, by cause");
  Family<Counter>& leaks =
      CounterFamily(*registry, names, "trainerd_leaks_total", "Runs stopped for a memory leak");
  Family<Gauge>& microbatch =
      GaugeFamily(*registry, names, "trainerd_plan_microbatch", "The last run's plan: microbatch");
  Family<Gauge>& accumulation = GaugeFamily(*registry, names, "trainerd_plan_accumulation_steps",
                                            "The last run's plan: accumulation steps");
  Family<Gauge>& checkpointed = GaugeFamily(*registry, names, "trainerd_plan_checkpointed_blocks",
                                            "The last run's plan: activation-checkpointed blocks");
  Family<Gauge>& state_on_host =
      GaugeFamily(*registry, names, "trainerd_plan_optimizer_state_on_host",
                  "The last run's plan: 1 when it kept the optimizer state on the host");
  Family<Gauge>& zero_stage =
      GaugeFamily(*registry, names, "trainerd_plan_zero_stage",
                  "The last run's plan: its ZeRO stage over the data-parallel ranks (0: none)");
  Family<Gauge>& outcome_value = GaugeFamily(
      *registry, names, "trainerd_outcome_value",
      "Outcomes the serving side reported, count-weighted mean, by release (the current one and "
      "the one it replaced: role), slice and metric");
  Family<Gauge>& outcome_count =
      GaugeFamily(*registry, names, "trainerd_outcome_count",
                  "How many outcomes trainerd_outcome_value is the mean of, by the same labels");
  std::vector<Gauge*> outcome_values, outcome_counts;  // their series, replaced as a whole
  Family<Gauge>& data_quality = GaugeFamily(
      *registry, names, "trainerd_data_quality",
      "The last input-quality check's figures, by figure: size_ratio, id_divergence (bits), "
      "column_shift and learned_share_shift against the current release's data; "
      "beyond_vocabulary, not_finite_rows and learned_share (shares)");
  std::vector<Gauge*> data_quality_series;  // the last check's figures, replaced as a whole
  Family<Gauge>& data_quality_breaches =
      GaugeFamily(*registry, names, "trainerd_data_quality_breaches",
                  "Thresholds the last input-quality check breached (0: the data passed)");
  Family<Gauge>& storage =
      GaugeFamily(*registry, names, "trainerd_storage_bytes",
                  "Bytes of the state directory after the last retention pass");
  Family<Gauge>& night_storage =
      GaugeFamily(*registry, names, "trainerd_storage_night_bytes",
                  "Bytes the newest run added: its release, report, worker log and trace");
  Family<Counter>& retention_removed =
      CounterFamily(*registry, names, "trainerd_retention_removed_bytes_total",
                    "Bytes the retention policy removed");
  Family<Gauge>& time_model_error = GaugeFamily(
      *registry, names, "trainerd_plan_time_model_error_ratio",
      "The planner's last choice: its time model's predicted over measured update, less 1");
  Family<Gauge>& plan_error = GaugeFamily(
      *registry, names, "trainerd_plan_duration_error_ratio",
      "The last night whose plan came from the planner: its timed update over training's, less 1");
};

DaemonMetrics::DaemonMetrics(const std::string& version) : f_(std::make_unique<Families>()) {
  f_->build_info.Add({{"version", version}}).Set(1);
  for (std::string_view outcome : kOutcomes) f_->runs.Add({{"outcome", std::string(outcome)}});
  for (std::string_view reason : kFallbackReasons) {
    f_->fallbacks.Add({{"reason", std::string(reason)}});
  }
  for (std::string_view reason : kRollbackReasons) {
    f_->rollbacks.Add({{"reason", std::string(reason)}});
  }
  f_->in_progress.Add({}).Set(0);
  f_->ooms.Add({});
  f_->leaks.Add({});
  f_->retention_removed.Add({});
}

DaemonMetrics::~DaemonMetrics() = default;

void DaemonMetrics::RunStarted() { f_->in_progress.Add({}).Set(1); }

void DaemonMetrics::Progress(double deadline, double predicted_finish) {
  f_->margin.Add({}).Set(deadline - predicted_finish);
}

void DaemonMetrics::RunFinished(const store::RunRecord& run,
                                const std::map<std::string, double>& evals, bool count) {
  if (count) {
    f_->in_progress.Add({}).Set(0);
    f_->runs.Add({{"outcome", std::string(store::ToString(run.status))}}).Increment();
    if (run.status == store::RunStatus::kOom) f_->ooms.Add({}).Increment();
    if (run.status == store::RunStatus::kLeak) f_->leaks.Add({}).Increment();
  }
  if (run.status == store::RunStatus::kSucceeded && run.ended_at) LastSuccess(*run.ended_at);
  DataQuality(run);
  if (run.started_at && run.ended_at) {
    f_->duration.Add({}).Set(*run.ended_at - *run.started_at);
    f_->margin.Add({}).Set(run.deadline_at - *run.ended_at);
  }
  if (run.samples_per_second) f_->samples.Add({}).Set(*run.samples_per_second);
  f_->world_size.Add({}).Set(static_cast<double>(run.world_size));
  if (run.final_loss) f_->train_loss.Add({}).Set(*run.final_loss);
  for (const auto& [slice, loss] : evals) f_->eval_loss.Add({{"slice", slice}}).Set(loss);
  if (run.peak_memory) {
    for (const auto& [category, bytes] : store::NamedCategories(*run.peak_memory)) {
      if (category == "peak") {
        f_->peak.Add({}).Set(static_cast<double>(bytes));
      } else {
        f_->ledger.Add({{"category", std::string(category)}}).Set(static_cast<double>(bytes));
      }
    }
  }
  if (run.mfu) f_->mfu.Add({}).Set(*run.mfu);
  if (run.cost_per_sample) f_->cost.Add({}).Set(*run.cost_per_sample);
  if (run.plan) {
    f_->microbatch.Add({}).Set(static_cast<double>(run.plan->microbatch));
    f_->accumulation.Add({}).Set(static_cast<double>(run.plan->accumulation_steps));
    f_->checkpointed.Add({}).Set(static_cast<double>(run.plan->checkpoint_blocks.size()));
    f_->state_on_host.Add({}).Set(run.plan->optimizer_state == StatePlacement::kHost ? 1 : 0);
    f_->zero_stage.Add({}).Set(static_cast<double>(run.plan->zero_stage));
  } else {
    // A run stopped before planning had no plan: no series rather than the previous run's.
    for (auto* family : {&f_->microbatch, &f_->accumulation, &f_->checkpointed, &f_->state_on_host,
                         &f_->zero_stage}) {
      if (family->Has({})) family->Remove(&family->Add({}));
    }
  }
}

void DaemonMetrics::Outcomes(std::int64_t current,
                             const std::vector<store::OutcomeTotal>& current_totals,
                             std::int64_t previous,
                             const std::vector<store::OutcomeTotal>& previous_totals) {
  // Only these two releases have series: the label stays bounded however many nights pass.
  for (Gauge* series : f_->outcome_values) f_->outcome_value.Remove(series);
  for (Gauge* series : f_->outcome_counts) f_->outcome_count.Remove(series);
  f_->outcome_values.clear();
  f_->outcome_counts.clear();
  for (const auto& [release, role, totals] : {std::tuple(current, "current", &current_totals),
                                              std::tuple(previous, "previous", &previous_totals)}) {
    int series = 0;
    for (const store::OutcomeTotal& total : *totals) {
      // Any slice name the serving side sends is a label value: bounded in length and number.
      if (total.slice.size() > kMaxOutcomeLabelBytes) continue;
      if (++series > kMaxOutcomeSeries) break;
      const prometheus::Labels labels = {{"release", std::to_string(release)},
                                         {"role", role},
                                         {"slice", total.slice},
                                         {"metric", total.metric}};
      Gauge& value = f_->outcome_value.Add(labels);
      value.Set(total.value);
      f_->outcome_values.push_back(&value);
      Gauge& count = f_->outcome_count.Add(labels);
      count.Set(static_cast<double>(total.count));
      f_->outcome_counts.push_back(&count);
    }
  }
}

void DaemonMetrics::Storage(std::int64_t storage_bytes, std::int64_t night_bytes,
                            std::int64_t removed_bytes) {
  f_->storage.Add({}).Set(static_cast<double>(storage_bytes));
  f_->night_storage.Add({}).Set(static_cast<double>(night_bytes));
  f_->retention_removed.Add({}).Increment(static_cast<double>(removed_bytes));
}

void DaemonMetrics::DataQuality(const store::RunRecord& run) {
  for (Gauge* series : f_->data_quality_series) f_->data_quality.Remove(series);
  f_->data_quality_series.clear();
  const nlohmann::json figures = nlohmann::json::parse(
      run.data_quality_json.empty() ? "null" : run.data_quality_json, nullptr, false);
  if (!figures.is_object()) {
    // No check ran (turned off) or the worker could not read the data, which stopped the run.
    f_->data_quality_breaches.Add({}).Set(run.status == store::RunStatus::kDataQuality ? 1 : 0);
    return;
  }
  for (const char* figure : {"size_ratio", "id_divergence", "column_shift", "beyond_vocabulary",
                             "not_finite_rows", "learned_share", "learned_share_shift"}) {
    const nlohmann::json value = figures.value(figure, nlohmann::json());
    if (!value.is_number()) continue;
    Gauge& series = f_->data_quality.Add({{"figure", figure}});
    series.Set(value.get<double>());
    f_->data_quality_series.push_back(&series);
  }
  f_->data_quality_breaches.Add({}).Set(
      static_cast<double>(figures.value("breaches", nlohmann::json::array()).size()));
}

void DaemonMetrics::PlanTimed(double time_model_error) {
  f_->time_model_error.Add({}).Set(time_model_error);
}

void DaemonMetrics::PlanTrained(double plan_error) { f_->plan_error.Add({}).Set(plan_error); }

void DaemonMetrics::Budget(std::int64_t budget_bytes, std::int64_t usable_bytes) {
  f_->budget.Add({}).Set(static_cast<double>(budget_bytes));
  f_->usable.Add({}).Set(static_cast<double>(usable_bytes));
}

void DaemonMetrics::LastSuccess(double ended_at) { f_->last_success.Add({}).Set(ended_at); }

void DaemonMetrics::Fallback(std::string_view reason) {
  f_->fallbacks.Add({{"reason", std::string(reason)}}).Increment();
}

void DaemonMetrics::Rollback(std::string_view reason) {
  f_->rollbacks.Add({{"reason", std::string(reason)}}).Increment();
}

std::string DaemonMetrics::Exposition() const {
  std::ostringstream out;
  prometheus::TextSerializer().Serialize(out, f_->registry->Collect());
  return out.str();
}

const std::vector<std::string>& DaemonMetrics::FamilyNames() const { return f_->names; }

std::shared_ptr<prometheus::Registry> DaemonMetrics::registry() const { return f_->registry; }

struct MetricsEndpoint::Server {
  std::unique_ptr<prometheus::Exposer> exposer;
};

Result<std::unique_ptr<MetricsEndpoint>> MetricsEndpoint::Start(const std::string& listen,
                                                                const DaemonMetrics& metrics) {
  auto server = std::make_unique<Server>();
  try {
    server->exposer = std::make_unique<prometheus::Exposer>(listen, 1);
  } catch (const std::exception& e) {
    return Status::IOError("metrics.listen " + listen + ": cannot listen: " + e.what());
  }
  server->exposer->RegisterCollectable(metrics.registry());
  return std::unique_ptr<MetricsEndpoint>(new MetricsEndpoint(std::move(server)));
}

MetricsEndpoint::MetricsEndpoint(std::unique_ptr<Server> server) : server_(std::move(server)) {}

MetricsEndpoint::~MetricsEndpoint() = default;

int MetricsEndpoint::port() const {
  const std::vector<int> ports = server_->exposer->GetListeningPorts();
  return ports.empty() ? 0 : ports.front();
}

}  // namespace trainerd::daemon
