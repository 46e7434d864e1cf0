#include "trainerd/store/records.h"

#include <array>
#include <utility>

#include "trainerd/common/enum_names.h"

namespace trainerd::store {
namespace {

// Each enumerator with its stored name.
constexpr EnumNames<ConfigState, 3> kConfigStateNames{{{
    {ConfigState::kCandidate, "candidate"},
    {ConfigState::kKnownGood, "known-good"},
    {ConfigState::kBad, "bad"},
}}};

constexpr EnumNames<RunStatus, 12> kRunStatusNames{{{
    {RunStatus::kScheduled, "scheduled"},
    {RunStatus::kRunning, "running"},
    {RunStatus::kSucceeded, "succeeded"},
    {RunStatus::kOom, "oom"},
    {RunStatus::kCrashed, "crashed"},
    {RunStatus::kLeak, "leak"},
    {RunStatus::kDeadline, "deadline"},
    {RunStatus::kRegressed, "regressed"},
    {RunStatus::kCancelled, "cancelled"},
    {RunStatus::kInterrupted, "interrupted"},
    {RunStatus::kRejected, "rejected"},
    {RunStatus::kDataQuality, "data_quality"},
}}};

constexpr EnumNames<Severity, 3> kSeverityNames{{{
    {Severity::kInfo, "info"},
    {Severity::kWarning, "warning"},
    {Severity::kError, "error"},
}}};

template <typename Enum, std::size_t N>
Result<Enum> Parse(const EnumNames<Enum, N>& names, std::string_view what, std::string_view text) {
  if (const std::optional<Enum> value = names.Parse(text)) return *value;
  std::string expected;
  for (const std::string& name : names.Names()) expected += (expected.empty() ? "" : ", ") + name;
  return Status::InvalidArgument("unknown " + std::string(what) + " '" + std::string(text) +
                                 "'; expected one of " + expected);
}

}  // namespace

std::string_view ToString(ConfigState state) { return kConfigStateNames.Name(state); }
std::string_view ToString(RunStatus status) { return kRunStatusNames.Name(status); }
std::string_view ToString(Severity severity) { return kSeverityNames.Name(severity); }

Result<ConfigState> ParseConfigState(std::string_view name) {
  return Parse(kConfigStateNames, "config state", name);
}
Result<RunStatus> ParseRunStatus(std::string_view name) {
  return Parse(kRunStatusNames, "run status", name);
}
Result<Severity> ParseSeverity(std::string_view name) {
  return Parse(kSeverityNames, "severity", name);
}

bool IsFinished(RunStatus status) {
  return status != RunStatus::kScheduled && status != RunStatus::kRunning;
}

std::array<std::pair<std::string_view, std::int64_t>, 7> NamedCategories(
    const MemoryByCategory& m) {
  return {{{"parameters", m.parameters},
           {"gradients", m.gradients},
           {"optimizer_state", m.optimizer_state},
           {"activations", m.activations},
           {"temporaries", m.temporaries},
           {"inputs", m.inputs},
           {"peak", m.peak}}};
}

}  // namespace trainerd::store
