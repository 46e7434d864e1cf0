#include "trainerd/trainer/spec/worker_protocol.h"

#include <algorithm>
#include <iterator>
#include <limits>
#include <type_traits>

#include "trainerd/common/json_input.h"
#include "trainerd/common/median.h"

namespace trainerd {
namespace {

// ---- the fields of each type, listed once -------------------------------------------------
// v(key, field) is a field; v.Flatten(part) writes a part's fields beside the type's own;
// v.Omittable(key, optional) is left out when empty (other optionals are written as null);
// v.Computed(key, value) is written, never read.

template <typename V>
void Fields(V& v, PlanSpec& s) {
  v("microbatch", s.microbatch);
  v("accumulation_steps", s.accumulation_steps);
  v("checkpoint_blocks", s.checkpoint_blocks);
  v("precision", s.precision);
  v("optimizer_state", s.optimizer_state);
  v("zero_stage", s.zero_stage);
  v("output_chunk", s.output_chunk);
  v("step_in_backward", s.step_in_backward);
  v("offload_activations", s.offload_activations);
}

template <typename V>
void Fields(V& v, DeviceInfo& s) {
  v("type", s.type);
  v("name", s.name);
  v("total_memory_bytes", s.total_memory_bytes);
  v.Omittable("compute_capability", s.compute_capability);
  v.Omittable("driver_version", s.driver_version);
  v.Omittable("runtime_version", s.runtime_version);
  v.Omittable("isa", s.isa);
  v.Omittable("blas", s.blas);
  v.Omittable("blas_core", s.blas_core);
  v.Omittable("blas_below_cpu", s.blas_below_cpu);
  v.Omittable("blas_core_fix", s.blas_core_fix);
}

template <typename V>
void Fields(V& v, PredictionDistribution& s) {
  v("entropy", s.entropy);
  v("top1", s.top1);
  v("classes", s.classes);
  v.Omittable("mean", s.mean);
  v.Omittable("spread", s.spread);
}

template <typename V>
void Fields(V& v, WindowLosses& s) {
  v("sums", s.sums);
  v("terms", s.terms);
}

template <typename V>
void Fields(V& v, SliceLoss& s) {
  v("name", s.name);
  v("loss", s.loss);
  v.Omittable("baseline_loss", s.baseline_loss);
  v.Omittable("predictions", s.predictions);
  v.Omittable("windows", s.windows);
}

template <typename V>
void Fields(V& v, StartEvent::Model& s) {
  v("kind", s.kind);
  v("parameters", s.parameters);
  v("blocks", s.blocks);
  v("block_size", s.block_size);
}

template <typename V>
void Fields(V& v, StartEvent::Distributed& s) {
  v("world_size", s.world_size);
  v("backend", s.backend);
  v("rank_batch", s.rank_batch);
}

template <typename V>
void Fields(V& v, SoftwareInfo& s) {
  v("torch_version", s.torch_version);
  v("blas", s.blas);
  v("compiler", s.compiler);
}

template <typename V>
void Fields(V& v, StartEvent::Slice& s) {
  v("name", s.name);
  v("train_bytes", s.train_bytes);
  v("holdout_bytes", s.holdout_bytes);
}

template <typename V>
void Fields(V& v, StartEvent::Data& s) {
  v("fingerprint", s.fingerprint);
  v("slices", s.slices);
}

template <typename V>
void Fields(V& v, StartEvent& s) {
  v("protocol_version", s.protocol_version);
  v("config", s.config);
  v("job_identity", s.job_identity);
  v("model", s.model);
  v("plan", s.plan);
  v("effective_batch", s.effective_batch);
  v("updates", s.updates);
  v("seed", s.seed);
  v("resumed_from_update", s.resumed_from_update);
  v("distributed", s.distributed);
  v("threads", s.threads);
  v("device", s.device);
  v("device_info", s.device_info);
  v("torch_version", s.torch_version);
  v("software", s.software);
  v("budget_bytes", s.budget_bytes);
  v("usable_bytes", s.usable_bytes);
  v("data", s.data);
}

template <typename V>
void Fields(V& v, WarningEvent& s) {
  v("kind", s.kind);
  v("message", s.message);
}

template <typename V>
void Fields(V& v, UpdateEvent& s) {
  v("update", s.update);
  v("updates", s.updates);
  v("loss", s.loss);
  v("lr", s.lr);
  v("grad_norm", s.grad_norm);
  v("skipped", s.skipped);
  v("update_seconds", s.update_seconds);
  v("samples_per_second", s.samples_per_second);
  v("tokens_per_second", s.tokens_per_second);
  v("live_bytes", s.live_bytes);
  v("elapsed_seconds", s.elapsed_seconds);
  v("eta_seconds", s.eta_seconds);
}

template <typename V>
void Fields(V& v, EvalEvent& s) {
  v("update", s.update);
  v("initial", s.initial);
  v.Omittable("init_from", s.init_from);
  v("slices", s.slices);
  v("mean_loss", s.mean_loss);
}

template <typename V>
void Fields(V& v, CheckpointEvent& s) {
  v("update", s.update);
  v("path", s.path);
  v("reason", s.reason);
}

template <typename V>
void Fields(V& v, FinishEvent::Companion& s) {
  v("path", s.path);
  v("sha256", s.sha256);
}

template <typename V>
void Fields(V& v, FinishEvent::ModelFiles& s) {
  v("weights", s.weights);
  v("weights_sha256", s.weights_sha256);
  v("description", s.description);
  v("companions", s.companions);
}

template <typename V>
void Fields(V& v, FinishEvent& s) {
  v("updates", s.updates);
  v("updates_trained", s.updates_trained);
  v("final_train_loss", s.final_train_loss);
  v("eval_slices", s.eval_slices);
  v("eval_mean_loss", s.eval_mean_loss);
  v("model_path", s.model_path);
  v("model_sha256", s.model_sha256);
  v("model_files", s.model_files);
  v("elapsed_seconds", s.elapsed_seconds);
  v("samples_per_second", s.samples_per_second);
  v("world_size", s.world_size);
  v("samples_per_second_per_rank", s.samples_per_second_per_rank);
  v("tokens_per_second", s.tokens_per_second);
  v("throughput_method", s.throughput_method);
  v("peak_bytes", s.peak_bytes);
  v("reserved_peak_bytes", s.reserved_peak_bytes);
  v("memory_method", s.memory_method);
  v("model_flops_per_sample", s.model_flops_per_sample);
  v("flops_method", s.flops_method);
  v("model_flops_per_second", s.model_flops_per_second);
  v("peak_flops_per_second", s.peak_flops_per_second);
  v.Omittable("isa_peak_flops_per_second", s.isa_peak_flops_per_second);
  v.Omittable("isa_peak_method", s.isa_peak_method);
  v("mfu", s.mfu);
  v("measurement_valid", s.measurement_valid);
  v("measurement_note", s.measurement_note);
  v("hardware", s.hardware);
}

template <typename V>
void Fields(V& v, MemorySnapshot& s) {
  v("parameters_bytes", s.parameters_bytes);
  v("gradients_bytes", s.gradients_bytes);
  v("optimizer_state_bytes", s.optimizer_state_bytes);
  v("host_state_bytes", s.host_state_bytes);
  v("live_bytes", s.live_bytes);
  v("peak_bytes", s.peak_bytes);
  v("reserved_bytes", s.reserved_bytes);
  v("limit_bytes", s.limit_bytes);
  v("budget_bytes", s.budget_bytes);
  v("usable_bytes", s.usable_bytes);
}

template <typename V>
void Fields(V& v, FailureDetails& s) {
  v("update", s.update);
  v.Omittable("plan", s.plan);
  v.Omittable("growth_bytes", s.growth_bytes);
  v("ledger", s.ledger);
}

template <typename V>
void Fields(V& v, ErrorEvent& s) {
  v("kind", s.kind);
  v("message", s.message);
  v.Omittable("details", s.details);
  v.Omittable("phase", s.phase);
}

template <typename V>
void Fields(V& v, BlockActivation& s) {
  v("index", s.index);
  v("activation_bytes", s.activation_bytes);
  v("checkpointed_activation_bytes", s.checkpointed_activation_bytes);
  v("forward_seconds", s.forward_seconds);
}

template <typename V>
void Fields(V& v, HostLedger& s) {
  v("master_weights_bytes", s.master_weights_bytes);
  v("gradients_bytes", s.gradients_bytes);
  v("optimizer_state_bytes", s.optimizer_state_bytes);
  v("activations_bytes", s.activations_bytes);
  v("peak_bytes", s.peak_bytes);
  v("budget_bytes", s.budget_bytes);
  v("in_device_count", s.in_device_count);
}

template <typename V>
void Fields(V& v, MemoryLedger& s) {
  v("protocol_version", s.protocol_version);
  v("parameters_bytes", s.parameters_bytes);
  v("frozen_parameters_bytes", s.frozen_parameters_bytes);
  v("gradients_bytes", s.gradients_bytes);
  v("optimizer_state_bytes", s.optimizer_state_bytes);
  v("activations_bytes", s.activations_bytes);
  v("output_layer_bytes", s.output_layer_bytes);
  v("temporaries_bytes", s.temporaries_bytes);
  v("inputs_bytes", s.inputs_bytes);
  v("evaluation_peak_bytes", s.evaluation_peak_bytes);
  v("peak_bytes", s.peak_bytes);
  v("reserved_peak_bytes", s.reserved_peak_bytes);
  v("budget_bytes", s.budget_bytes);
  v("usable_bytes", s.usable_bytes);
  v.Omittable("host", s.host);
  v("sharded_over_ranks", s.sharded_over_ranks);
  v("optimizer_state_on_other_ranks", s.optimizer_state_on_other_ranks);
  v("blocks", s.blocks);
  v("blocks_note", s.blocks_note);
  v("plan", s.plan);
  v("method", s.method);
  v("device_info", s.device_info);
}

template <typename V>
void Fields(V& v, RejectedPlan& s) {
  v.Flatten(s.plan);
  v("predicted_peak_bytes", s.predicted_peak_bytes);
  v("predicted_duration_seconds", s.predicted_duration_seconds);
  v("reason", s.reason);
  v.Omittable("measured_update_seconds", s.measured_update_seconds);
}

template <typename V>
void Fields(V& v, TimedPlan& s) {
  v.Flatten(s.plan);
  v("update_seconds", s.update_seconds);
  if (!s.update_seconds.empty()) v.Computed("median_update_seconds", s.MedianSeconds());
}

template <typename V>
void Fields(V& v, ChosenPlan::Selection& s) {
  v("timed", s.timed);
  v("noise", s.noise);
  v("tie_band", s.tie_band);
}

template <typename V>
void Fields(V& v, ChosenPlan& s) {
  v("protocol_version", s.protocol_version);
  v.Flatten(s.plan);
  v("predicted_peak_bytes", s.predicted_peak_bytes);
  v("measured_peak_bytes", s.measured_peak_bytes);
  v("usable_bytes", s.usable_bytes);
  v("host_is_the_device", s.host_is_the_device);
  v("simulated_device", s.simulated_device);
  v("predicted_update_seconds", s.predicted_update_seconds);
  v("measured_update_seconds", s.measured_update_seconds);
  v("predicted_duration_seconds", s.predicted_duration_seconds);
  v("modelled_duration_seconds", s.modelled_duration_seconds);
  v.Computed("time_model_error", s.TimeModelError());
  v("window_seconds", s.window_seconds);
  v("fits_memory", s.fits_memory);
  v("fits_window", s.fits_window);
  v("probe_seconds", s.probe_seconds);
  v("rejected", s.rejected);
  v("selection", s.selection);
  v("device_info", s.device_info);
}

template <typename V>
void Fields(V& v, ParityTolerances& s) {
  v("loss", s.loss);
  v("learning_rate", s.learning_rate);
  v("grad_norm", s.grad_norm);
  v("gradient", s.gradient);
  v("step", s.step);
  v("tensor_step", s.tensor_step);
}

template <typename V>
void Fields(V& v, ParityUpdate& s) {
  v("loss", s.loss);
  v("lr", s.lr);
  v("grad_norm", s.grad_norm);
  v("skipped", s.skipped);
  v("gradient_diff", s.gradient_diff);
  v("gradient_parameter", s.gradient_parameter);
  v("step_diff", s.step_diff);
  v("worst_tensor_step_diff", s.worst_tensor_step_diff);
  v("worst_tensor_step_parameter", s.worst_tensor_step_parameter);
}

template <typename V>
void Fields(V& v, ParityComparison& s) {
  v("judges", s.judges);
  v("precision", s.precision);
  v("tolerances", s.tolerances);
  v("updates", s.updates);
  v("worst_ratio", s.worst_ratio);
  v("worst_check", s.worst_check);
}

template <typename V>
void Fields(V& v, ParityMemory& s) {
  v("usable_bytes", s.usable_bytes);
  v("trainers", s.trainers);
  v("model_state_bytes", s.model_state_bytes);
  v("snapshot_bytes", s.snapshot_bytes);
  v("limit_bytes", s.limit_bytes);
  v("reference_on_host", s.reference_on_host);
  v("predicted_peak_bytes", s.predicted_peak_bytes);
  v("measured_peak_bytes", s.measured_peak_bytes);
}

template <typename V>
void Fields(V& v, ParityReport& s) {
  v("protocol_version", s.protocol_version);
  v("pass", s.pass);
  v("failures", s.failures);
  v("plan", s.plan);
  v("checked_plan", s.checked_plan);
  v("checked_effective_batch", s.checked_effective_batch);
  v("reduction", s.reduction);
  v("own_dropout_switched_off", s.own_dropout_switched_off);
  v("comparisons", s.comparisons);
  v("memory", s.memory);
  v("device_info", s.device_info);
}

template <typename V>
void Fields(V& v, ProfileReport::Group& s) {
  v("group", s.group);
  v("self_seconds", s.self_seconds);
  v("share", s.share);
  v("calls", s.calls);
  v("flops", s.flops);
  v("bytes", s.bytes);
  v("intensity", s.intensity);
  v("achieved_flops", s.achieved_flops);
  v("achieved_bytes_per_second", s.achieved_bytes_per_second);
  v("attainable_flops", s.attainable_flops);
  v("fraction_of_bound", s.fraction_of_bound);
  v("bound", s.bound);
}

template <typename V>
void Fields(V& v, ProfileReport::Op& s) {
  v("name", s.name);
  v("group", s.group);
  v("calls", s.calls);
  v("self_seconds", s.self_seconds);
  v("share", s.share);
}

template <typename V>
void Fields(V& v, ProfileReport& s) {
  v("protocol_version", s.protocol_version);
  v("updates", s.updates);
  v("warmup_updates", s.warmup_updates);
  v("update_seconds", s.update_seconds);
  v("unprofiled_update_seconds", s.unprofiled_update_seconds);
  v("outside_ops_seconds", s.outside_ops_seconds);
  v("precision", s.precision);
  v("peak_flops", s.peak_flops);
  v.Omittable("isa_peak_flops", s.isa_peak_flops);
  v.Omittable("isa_peak_method", s.isa_peak_method);
  v("memory_bandwidth_bytes_per_second", s.memory_bandwidth_bytes_per_second);
  v("ridge_intensity", s.ridge_intensity);
  v("groups", s.groups);
  v("top_ops", s.top_ops);
  v("trace_path", s.trace_path);
  v("method", s.method);
  v("device_info", s.device_info);
}

template <typename V>
void Fields(V& v, ColumnSummary& s) {
  v("mean", s.mean);
  v("spread", s.spread);
}

template <typename V>
void Fields(V& v, DocumentProfile& s) {
  v("count", s.count);
  v("median_length", s.median_length);
  v("longest", s.longest);
  v("padding_share", s.padding_share);
}

template <typename V>
void Fields(V& v, DataProfile& s) {
  v("train_samples", s.train_samples);
  v("id_counts", s.id_counts);
  v.Omittable("learned_targets", s.learned_targets);
  v.Omittable("documents", s.documents);
  v("rows_not_finite", s.rows_not_finite);
  v("columns", s.columns);
}

template <typename V>
void Fields(V& v, DataProfileReport& s) {
  v("protocol_version", s.protocol_version);
  v("data_fingerprint", s.data_fingerprint);
  v("profile", s.profile);
  v("vocabulary", s.vocabulary);
  v("ids_beyond_vocabulary", s.ids_beyond_vocabulary);
  v("device_info", s.device_info);
}

template <typename V>
void Fields(V& v, DeviceInfoReport& s) {
  v("protocol_version", s.protocol_version);
  v("device_info", s.device_info);
}

template <typename V>
void Fields(V& v, VersionReport& s) {
  v("protocol_version", s.protocol_version);
  v("trainer_version", s.trainer_version);
  v("software", s.software);
}

template <typename V>
void Fields(V& v, PlanEvent& s) {
  v("plan", s.plan);
}

template <typename T>
struct IsOptional : std::false_type {};
template <typename T>
struct IsOptional<std::optional<T>> : std::true_type {};
template <typename T>
struct IsVector : std::false_type {};
template <typename T>
struct IsVector<std::vector<T>> : std::true_type {};

// ---- the serializer -----------------------------------------------------------------------

class Writer {
 public:
  nlohmann::json out = nlohmann::json::object();

  template <typename T>
  void operator()(const char* key, const T& value) {
    out[key] = Value(value);
  }
  template <typename T>
  void Omittable(const char* key, const std::optional<T>& value) {
    if (value) out[key] = Value(*value);
  }
  template <typename T>
  void Flatten(const T& part) {
    out.update(Object(part));
  }
  void Computed(const char* key, double value) { out[key] = value; }

  template <typename T>
  static nlohmann::json Object(const T& value) {
    Writer writer;
    Fields(writer, const_cast<T&>(value));  // the writer only reads
    return writer.out;
  }

 private:
  template <typename T>
  static nlohmann::json Value(const T& value) {
    if constexpr (std::is_same_v<T, Precision> || std::is_same_v<T, StatePlacement>) {
      return ToString(value);
    } else if constexpr (std::is_same_v<T, Sha256Digest>) {
      return value.hex;
    } else if constexpr (std::is_same_v<T, PlanAndReference>) {
      return nlohmann::json::array({value.plan, value.reference});
    } else if constexpr (std::is_arithmetic_v<T> || std::is_same_v<T, std::string> ||
                         std::is_same_v<T, nlohmann::json>) {
      return value;
    } else if constexpr (IsOptional<T>::value) {
      return value ? Value(*value) : nlohmann::json(nullptr);
    } else if constexpr (IsVector<T>::value) {
      nlohmann::json list = nlohmann::json::array();
      for (const auto& element : value) list.push_back(Value(element));
      return list;
    } else {
      return Object(value);
    }
  }
};

// ---- the parser ---------------------------------------------------------------------------

// Whether `value` is a number whose integer part fits in [0, max]: a cast of a double out of
// range is undefined behaviour, and the protocol's counts and sizes are never negative.
bool IsCount(const nlohmann::json& value, std::int64_t max) {
  if (value.is_number_unsigned()) {
    return value.get<std::uint64_t>() <= static_cast<std::uint64_t>(max);
  }
  if (value.is_number_integer()) {
    return value.get<std::int64_t>() >= 0 && value.get<std::int64_t>() <= max;
  }
  // max + 1 is a power of two for both int and int64, so exact as a double.
  return value.is_number_float() && value.get<double>() >= 0 &&
         value.get<double>() < static_cast<double>(max / 2 + 1) * 2;
}

bool IsSha256Hex(const std::string& hex) {
  return hex.size() == 64 && hex.find_first_not_of("0123456789abcdef") == std::string::npos;
}

// The names of an enum the protocol writes as a string.
template <typename T>
constexpr const auto& NamesOf() {
  if constexpr (std::is_same_v<T, Precision>) {
    return kPrecisionNames;
  } else {
    return kStatePlacementNames;
  }
}

class Reader {
 public:
  Reader(const nlohmann::json& in, std::string prefix, std::vector<std::string>* mistyped)
      : in_(in), prefix_(std::move(prefix)), mistyped_(mistyped) {}

  template <typename T>
  void operator()(const char* key, T& value) {
    const auto it = in_.find(key);
    if (it == in_.end()) return;  // absent: the default
    if (!Read(*it, prefix_ + key, value)) mistyped_->push_back(prefix_ + key);
  }
  template <typename T>
  void Omittable(const char* key, std::optional<T>& value) {
    (*this)(key, value);
  }
  template <typename T>
  void Flatten(T& part) {
    Fields(*this, part);
  }
  void Computed(const char* /*key*/, double /*value*/) {}

  template <typename T>
  static T Object(const nlohmann::json& json, const std::string& prefix,
                  std::vector<std::string>* mistyped) {
    T value{};
    Reader reader(json, prefix, mistyped);
    Fields(reader, value);
    return value;
  }

 private:
  // A figure that may not be finite: JSON has no inf or NaN, so such a figure (an fp16
  // overflow's gradient norm, a diverged loss) is written null, and is read back as NaN.
  bool ReadFigure(const nlohmann::json& json, const std::string& path, double& out) {
    if (!json.is_null()) return Read(json, path, out);
    out = std::numeric_limits<double>::quiet_NaN();
    return true;
  }

  // Reads `json` into `out`; false (out untouched) when it has another type.
  template <typename T>
  bool Read(const nlohmann::json& json, const std::string& path, T& out) {
    if constexpr (std::is_same_v<T, int>) {
      if (!IsCount(json, std::numeric_limits<int>::max())) return false;
      out = json.is_number_float() ? static_cast<int>(json.get<double>()) : json.get<int>();
    } else if constexpr (std::is_same_v<T, std::int64_t>) {
      if (!IsCount(json, std::numeric_limits<std::int64_t>::max())) return false;
      out = json.is_number_float() ? static_cast<std::int64_t>(json.get<double>())
                                   : json.get<std::int64_t>();
    } else if constexpr (std::is_same_v<T, std::uint64_t>) {
      const bool non_negative_integer =
          json.is_number_unsigned() || (json.is_number_integer() && json.get<std::int64_t>() >= 0);
      if (!non_negative_integer) return false;
      out = json.get<std::uint64_t>();
    } else if constexpr (std::is_same_v<T, double>) {
      if (!json.is_number()) return false;
      out = json.get<double>();
    } else if constexpr (std::is_same_v<T, bool>) {
      if (!json.is_boolean()) return false;
      out = json.get<bool>();
    } else if constexpr (std::is_same_v<T, std::string>) {
      if (!json.is_string()) return false;
      out = json.get<std::string>();
    } else if constexpr (std::is_same_v<T, nlohmann::json>) {
      out = json;
    } else if constexpr (std::is_same_v<T, Precision> || std::is_same_v<T, StatePlacement>) {
      if (!json.is_string()) return false;
      const std::optional<T> named = NamesOf<T>().Parse(json.get<std::string>());
      if (!named) return false;
      out = *named;
    } else if constexpr (std::is_same_v<T, Sha256Digest>) {
      if (!json.is_string() || !IsSha256Hex(json.get<std::string>())) return false;
      out.hex = json.get<std::string>();
    } else if constexpr (std::is_same_v<T, PlanAndReference>) {
      if (!json.is_array() || json.size() != 2) return false;
      T pair;
      if (!ReadFigure(json[0], path, pair.plan) || !ReadFigure(json[1], path, pair.reference)) {
        return false;
      }
      out = pair;
    } else if constexpr (IsOptional<T>::value) {
      if (json.is_null()) {
        out.reset();
        return true;
      }
      typename T::value_type value{};
      if (!Read(json, path, value)) return false;
      out = std::move(value);
    } else if constexpr (IsVector<T>::value) {
      if (!json.is_array()) return false;
      T list;
      for (std::size_t i = 0; i < json.size(); ++i) {
        const std::string at = path + "[" + std::to_string(i) + "]";
        typename T::value_type element{};
        if (Read(json[i], at, element)) {
          list.push_back(std::move(element));
        } else {
          mistyped_->push_back(at);
        }
      }
      out = std::move(list);
    } else {
      if (!json.is_object()) return false;
      out = Object<T>(json, path + ".", mistyped_);
    }
    return true;
  }

  const nlohmann::json& in_;
  std::string prefix_;
  std::vector<std::string>* mistyped_;
};

// Every event with its name on the wire, in WorkerEvent's order.
constexpr const char* kEventNames[] = {"start",      "warning", "update", "eval",
                                       "checkpoint", "finish",  "error",  "plan"};
static_assert(std::size(kEventNames) == std::variant_size_v<WorkerEvent>);

template <std::size_t I = 0>
std::optional<WorkerEvent> EventNamed(const std::string& name, const nlohmann::json& json,
                                      std::vector<std::string>* mistyped) {
  if constexpr (I == std::variant_size_v<WorkerEvent>) {
    return std::nullopt;
  } else {
    if (name == kEventNames[I]) {
      return WorkerEvent(
          std::in_place_index<I>,
          Reader::Object<std::variant_alternative_t<I, WorkerEvent>>(json, "", mistyped));
    }
    return EventNamed<I + 1>(name, json, mistyped);
  }
}

void SortUnique(std::vector<std::string>* names) {
  std::sort(names->begin(), names->end());
  names->erase(std::unique(names->begin(), names->end()), names->end());
}

}  // namespace

template <typename T>
nlohmann::json ToJson(const T& value) {
  return Writer::Object(value);
}

nlohmann::json ToJson(const WorkerEvent& event) {
  nlohmann::json json = std::visit([](const auto& e) { return Writer::Object(e); }, event);
  json["event"] = kEventNames[event.index()];
  return json;
}

template <typename T>
T Parse(const nlohmann::json& json, std::vector<std::string>* mistyped) {
  std::vector<std::string> names;
  if (!json.is_object()) {
    if (mistyped) *mistyped = {"(not an object)"};
    return T{};
  }
  T value = Reader::Object<T>(json, "", &names);
  SortUnique(&names);
  if (mistyped) *mistyped = std::move(names);
  return value;
}

Result<ParsedEvent> ParseWorkerEvent(std::string_view line) {
  const nlohmann::json json = ParseBoundedJson(line);
  if (!json.is_object() || !json.contains("event") || !json["event"].is_string()) {
    return Status::InvalidArgument("not a worker event: a JSON object with an \"event\"");
  }
  ParsedEvent parsed;
  parsed.kind = json["event"].get<std::string>();
  std::optional<WorkerEvent> event = EventNamed(parsed.kind, json, &parsed.mistyped);
  if (!event) return Status::InvalidArgument("unknown worker event '" + parsed.kind + "'");
  parsed.event = std::move(*event);
  SortUnique(&parsed.mistyped);
  return parsed;
}

double TimedPlan::MedianSeconds() const { return Median(update_seconds); }

double ChosenPlan::TimeModelError() const {
  if (predicted_update_seconds <= 0 || measured_update_seconds <= 0) return 0;
  return predicted_update_seconds / measured_update_seconds - 1;
}

nlohmann::json ToJson(const PlanSpec& plan) { return Writer::Object(plan); }

#define TRAINERD_PROTOCOL_TYPE(T)                    \
  template nlohmann::json ToJson<T>(const T& value); \
  template T Parse<T>(const nlohmann::json& json, std::vector<std::string>* mistyped);
TRAINERD_PROTOCOL_TYPE(PlanSpec)
TRAINERD_PROTOCOL_TYPE(DeviceInfo)
TRAINERD_PROTOCOL_TYPE(StartEvent)
TRAINERD_PROTOCOL_TYPE(StartEvent::Model)
TRAINERD_PROTOCOL_TYPE(FinishEvent)
TRAINERD_PROTOCOL_TYPE(ErrorEvent)
TRAINERD_PROTOCOL_TYPE(MemorySnapshot)
TRAINERD_PROTOCOL_TYPE(FailureDetails)
TRAINERD_PROTOCOL_TYPE(MemoryLedger)
TRAINERD_PROTOCOL_TYPE(RejectedPlan)
TRAINERD_PROTOCOL_TYPE(ChosenPlan)
TRAINERD_PROTOCOL_TYPE(ParityReport)
TRAINERD_PROTOCOL_TYPE(ProfileReport)
TRAINERD_PROTOCOL_TYPE(DeviceInfoReport)
TRAINERD_PROTOCOL_TYPE(VersionReport)
TRAINERD_PROTOCOL_TYPE(PredictionDistribution)
TRAINERD_PROTOCOL_TYPE(WindowLosses)
TRAINERD_PROTOCOL_TYPE(DataProfile)
TRAINERD_PROTOCOL_TYPE(DataProfileReport)
#undef TRAINERD_PROTOCOL_TYPE

}  // namespace trainerd
