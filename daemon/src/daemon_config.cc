#include "trainerd/daemon/daemon_config.h"

#include <grp.h>
#include <yaml-cpp/yaml.h>

#include <cctype>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <system_error>
#include <tuple>

#include "trainerd/daemon/schedule.h"
#include "trainerd/trainer/spec/units.h"
#include "trainerd/trainer/spec/yaml_reader.h"

namespace trainerd::daemon {
namespace {

namespace fs = std::filesystem;

constexpr double kDaySeconds = 24 * 3600.0;
constexpr const char* kZoneinfoDir = "/usr/share/zoneinfo";
// trainer-run --parity-updates takes at most this many.
constexpr int kMaxParityUpdates = 1000;

std::string Quoted(const std::string& text) { return "'" + text + "'"; }

// The value of `key` in `map` as written, for an error about a value that parsed but does not
// fit with another.
std::string Written(const YAML::Node& map, const std::string& key) {
  if (!map.IsMap() || !map[key] || !map[key].IsScalar()) return "nothing";
  return Quoted(map[key].Scalar());
}

// `path` if absolute, else `base`/`path`; lexically normal, without a trailing separator.
std::string Resolve(const fs::path& base, const std::string& path) {
  fs::path p(path);
  p = (p.is_absolute() ? p : base / p).lexically_normal();
  if (!p.has_filename() && p.has_relative_path()) p = p.parent_path();
  return p.string();
}

// "01:30" or "1:30" -> 90; nullopt unless H or HH in 0..23, then ':', then MM in 00..59.
std::optional<int> ParseClock(const std::string& text) {
  const auto colon = text.find(':');
  if (colon == std::string::npos || colon == 0 || colon > 2 || text.size() != colon + 3) {
    return std::nullopt;
  }
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (i != colon && !std::isdigit(static_cast<unsigned char>(text[i]))) return std::nullopt;
  }
  const int hours = std::stoi(text.substr(0, colon));
  const int minutes = std::stoi(text.substr(colon + 1));
  if (hours > 23 || minutes > 59) return std::nullopt;
  return hours * 60 + minutes;
}

// "UTC", "local", or a compiled zone file under /usr/share/zoneinfo. The file check matters:
// glibc silently falls back to UTC for a TZ it cannot load, which would shift every night.
bool KnownTimezone(const std::string& name) {
  if (name == "UTC" || name == "local") return true;
  if (name.empty() || name.front() == '/' || name.find("..") != std::string::npos) return false;
  for (const char c : name) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '/' && c != '_' && c != '-' &&
        c != '+') {
      return false;
    }
  }
  const fs::path file = fs::path(kZoneinfoDir) / name;
  std::error_code ec;
  if (!fs::is_regular_file(file, ec)) return false;
  // Not every file there is a zone (zone.tab, tzdata.zi): compiled zones start with "TZif".
  std::ifstream in(file, std::ios::binary);
  char magic[4] = {};
  return in.read(magic, sizeof(magic)) && std::string(magic, sizeof(magic)) == "TZif";
}

// "local" is resolved now, so a TZ the database cannot read fails the config, not the night.
std::optional<std::string> LocalTimezoneError(const std::string& name) {
  if (name != "local") return std::nullopt;
  try {
    ResolveTimezone(name);
    return std::nullopt;
  } catch (const std::runtime_error& e) {
    return e.what();
  }
}

// "127.0.0.1:9464", "localhost:9464", "[::1]:9464": a host (name, IPv4, or bracketed IPv6)
// and a port in 1..65535.
bool ValidListenAddress(const std::string& text) {
  const auto colon = text.rfind(':');
  if (colon == std::string::npos) return false;
  const std::string host = text.substr(0, colon);
  const std::string port = text.substr(colon + 1);
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') {
    for (const char c : host.substr(1, host.size() - 2)) {
      if (!std::isxdigit(static_cast<unsigned char>(c)) && c != ':' && c != '.') return false;
    }
  } else {
    if (host.empty()) return false;
    for (const char c : host) {
      if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '-') return false;
    }
  }
  if (port.empty() || port.size() > 5) return false;
  for (const char c : port) {
    if (!std::isdigit(static_cast<unsigned char>(c))) return false;
  }
  const int number = std::stoi(port);
  return number >= 1 && number <= 65535;
}

// Reads a path-valued string key; "" is an error unless `allow_empty`.
void ReadPath(YamlReader& reader, const std::string& key, std::string* out, bool allow_empty) {
  std::string value = *out;
  reader.String(key, &value, {});
  if (!reader.ok() || !reader.Has(key)) return;
  if (value.empty() && !allow_empty) {
    reader.Fail(key, "a non-empty path", "''");
    return;
  }
  *out = value;
}

// `schedule_node` is the raw mapping, to quote a value as written in a cross-field error.
void ReadSchedule(YamlReader schedule, const YAML::Node& schedule_node, ScheduleConfig* out) {
  std::string start;
  schedule.String("start", &start, {});
  if (schedule.ok() && schedule.Has("start")) {
    const std::optional<int> minute = ParseClock(start);
    if (minute) {
      out->start_minute = *minute;
    } else {
      schedule.Fail("start", "HH:MM (00:00-23:59)", Quoted(start));
    }
  }
  std::string timezone = out->timezone;
  schedule.String("timezone", &timezone, {});
  if (schedule.ok() && schedule.Has("timezone")) {
    const std::optional<std::string> local_error = LocalTimezoneError(timezone);
    if (local_error) {
      schedule.Fail("timezone", "a local timezone the database has (" + *local_error + ")",
                    Quoted(timezone));
    } else if (KnownTimezone(timezone)) {
      out->timezone = timezone;
    } else {
      schedule.Fail("timezone",
                    "UTC, local or a timezone name in " + std::string(kZoneinfoDir) +
                        " such as Europe/Berlin",
                    Quoted(timezone));
    }
  }
  schedule.DurationSeconds("window", &out->window_seconds, 0, kDaySeconds, /*min_open=*/true);
  schedule.DurationSeconds("deadline_grace", &out->deadline_grace_seconds, 0, kDaySeconds);
  if (schedule.ok() && out->deadline_grace_seconds >= out->window_seconds) {
    if (schedule.Has("deadline_grace")) {
      schedule.Fail(
          "deadline_grace",
          "a duration shorter than schedule.window (" + FormatDuration(out->window_seconds) + ")",
          Written(schedule_node, "deadline_grace"));
    } else {
      schedule.Fail("window",
                    "a duration longer than schedule.deadline_grace (" +
                        FormatDuration(out->deadline_grace_seconds) + ")",
                    Written(schedule_node, "window"));
    }
  }
  schedule.RejectUnknownKeys();
}

void ReadCost(YamlReader cost, CostConfig* out) {
  cost.Double("per_device_hour", &out->per_device_hour, 0, 1e9);
  std::string currency = out->currency;
  cost.String("currency", &currency, {});
  if (cost.ok() && cost.Has("currency")) {
    bool code = currency.size() == 3;
    for (const char c : currency) code = code && c >= 'A' && c <= 'Z';
    if (code) {
      out->currency = currency;
    } else {
      cost.Fail("currency", "a three-letter currency code such as USD or EUR", Quoted(currency));
    }
  }
  cost.RejectUnknownKeys();
}

void ReadRegression(YamlReader regression, RegressionConfig* out) {
  regression.Fraction("throughput_tolerance", &out->throughput_tolerance, 0, 1);
  regression.Fraction("eval_loss_tolerance", &out->eval_loss_tolerance, 0, 1);
  regression.FractionMap("slice_tolerances", &out->slice_tolerances, 0, 1);
  regression.Fraction("gate_confidence", &out->gate_confidence, 0.5, 0.999);
  regression.Bool("beat_baseline", &out->beat_baseline);
  regression.Fraction("baseline_margin", &out->baseline_margin, 0, 0.5);
  regression.RejectUnknownKeys();
}

void ReadOutcomes(YamlReader outcomes, OutcomesConfig* out) {
  for (YamlReader metric : outcomes.ChildList("metrics")) {
    OutcomeMetricConfig m;
    metric.String("name", &m.name, {});
    if (metric.ok() && m.name.empty()) metric.Fail("name", "the metric's name", "nothing");
    if (metric.ok() && out->Metric(m.name) != nullptr) {
      metric.Fail("name", "a name no other metric has", Quoted(m.name));
    }
    std::string better;
    metric.String("better", &better, {"higher", "lower"});
    if (metric.ok() && better.empty()) metric.Fail("better", "higher or lower", "nothing");
    m.higher_is_better = better == "higher";
    metric.DurationSeconds("maturity", &m.maturity_seconds, 0, 365 * kDaySeconds);
    int min_count = static_cast<int>(m.min_count);
    metric.Int("min_count", &min_count, 1, 1'000'000'000);
    m.min_count = min_count;
    metric.Fraction("tolerance", &m.tolerance, 0, 1);
    metric.RejectUnknownKeys();
    out->metrics.push_back(m);
  }
  outcomes.StringList("slices", &out->slices);
  outcomes.DurationSeconds("check_interval", &out->check_interval_seconds, 0, kDaySeconds,
                           /*min_open=*/true);
  outcomes.Fraction("confidence", &out->confidence, 0.5, 0.999);
  outcomes.RejectUnknownKeys();
}

}  // namespace

const OutcomeMetricConfig* OutcomesConfig::Metric(const std::string& name) const {
  for (const OutcomeMetricConfig& m : metrics) {
    if (m.name == name) return &m;
  }
  return nullptr;
}

double RegressionConfig::ToleranceFor(const std::string& slice) const {
  const auto it = slice_tolerances.find(slice);
  return it != slice_tolerances.end() ? it->second : eval_loss_tolerance;
}

std::string DaemonConfig::database_path() const { return state_dir + "/trainerd.db"; }

Result<DaemonConfig> ParseDaemonConfigText(const std::string& yaml_text,
                                           const std::string& origin) {
  Result<YAML::Node> parsed = LoadYamlMapping(yaml_text, origin);
  if (!parsed.ok()) return parsed.status();
  const YAML::Node& root = *parsed;

  DaemonConfig config;
  config.source_path = origin;
  YamlReader top(root, origin, "");

  std::string job;
  ReadPath(top, "job", &job, /*allow_empty=*/false);
  if (top.ok() && !top.Has("job")) top.Fail("job", "the path of a job spec file", "nothing");
  ReadSchedule(top.Child("schedule"), root["schedule"], &config.schedule);
  std::string state_dir;
  ReadPath(top, "state_dir", &state_dir, /*allow_empty=*/false);
  YamlReader control = top.Child("control");
  std::string socket;
  ReadPath(control, "socket", &socket, /*allow_empty=*/false);
  for (const auto& [key, name, where] :
       {std::tuple("group", &config.control_group, &config.control_group_where),
        std::tuple("read_group", &config.control_read_group, &config.control_read_group_where)}) {
    control.String(key, name, {});
    if (control.Has(key)) {
      const YAML::Mark mark = root["control"][key].Mark();
      *where = origin + (mark.line >= 0 ? ":" + std::to_string(mark.line + 1) : "");
    }
  }
  control.RejectUnknownKeys();
  YamlReader metrics = top.Child("metrics");
  metrics.String("listen", &config.metrics_listen, {});
  if (metrics.ok() && !config.metrics_listen.empty() &&
      !ValidListenAddress(config.metrics_listen)) {
    metrics.Fail("listen",
                 "host:port with a port in 1-65535 such as 127.0.0.1:9464, or \"\" to disable",
                 Quoted(config.metrics_listen));
  }
  metrics.RejectUnknownKeys();
  ReadCost(top.Child("cost"), &config.cost);
  ReadRegression(top.Child("regression"), &config.regression);
  YamlReader quality = top.Child("data_quality");
  quality.Bool("check", &config.data_quality.check);
  quality.Fraction("min_size_ratio", &config.data_quality.min_size_ratio, 0, 1);
  quality.Double("max_id_divergence", &config.data_quality.max_id_divergence, 0, 1);
  quality.Fraction("max_beyond_vocabulary", &config.data_quality.max_beyond_vocabulary, 0, 1);
  quality.Fraction("max_not_finite_rows", &config.data_quality.max_not_finite_rows, 0, 1);
  quality.Double("max_column_shift", &config.data_quality.max_column_shift, 0, 1e9);
  quality.Fraction("max_learned_share_shift", &config.data_quality.max_learned_share_shift, 0, 1);
  quality.RejectUnknownKeys();
  ReadOutcomes(top.Child("outcomes"), &config.outcomes);
  YamlReader retention = top.Child("retention");
  retention.Int("releases", &config.retention.releases, 1, 100000);
  retention.DurationSeconds("files", &config.retention.files_seconds, 0, 3650 * kDaySeconds,
                            /*min_open=*/true);
  retention.RejectUnknownKeys();
  YamlReader retries = top.Child("retries");
  retries.Int("max_attempts", &config.max_attempts, 1, 16);
  retries.RejectUnknownKeys();
  YamlReader parity = top.Child("parity");
  parity.Int("updates", &config.parity_updates, 0, kMaxParityUpdates);
  parity.RejectUnknownKeys();
  YamlReader worker = top.Child("worker");
  std::string worker_path;
  ReadPath(worker, "path", &worker_path, /*allow_empty=*/true);
  worker.RejectUnknownKeys();
  top.RejectUnknownKeys();
  if (!top.ok()) return Status::InvalidArgument(top.first_error());

  // Absolute paths, so that they mean the same after the daemon or its worker changes
  // directory. absolute() only consults the current directory; it touches no other file.
  std::error_code ec;
  fs::path base = fs::absolute(origin, ec).parent_path();
  if (ec) base = fs::path(origin).parent_path();
  config.job_path = Resolve(base, job);
  config.state_dir = Resolve(base, state_dir.empty() ? "state" : state_dir);
  config.socket_path = socket.empty() ? config.state_dir + "/trainerd.sock" : Resolve(base, socket);
  if (!worker_path.empty()) config.worker_path = Resolve(base, worker_path);
  return config;
}

Result<ControlGroupIds> ResolveControlGroups(const DaemonConfig& config) {
  ControlGroupIds ids;
  for (const auto& [key, name, where, id] :
       {std::tuple("group", &config.control_group, &config.control_group_where, &ids.operate),
        std::tuple("read_group", &config.control_read_group, &config.control_read_group_where,
                   &ids.read)}) {
    if (name->empty()) continue;
    const struct group* g = ::getgrnam(name->c_str());
    if (g == nullptr) {
      return Status::InvalidArgument(*where + ": control." + key +
                                     ": expected the name of a group in the group database "
                                     "(getent group), got '" +
                                     *name + "'");
    }
    *id = g->gr_gid;
  }
  return ids;
}

Status CheckHostNames(const DaemonConfig& config) { return ResolveControlGroups(config).status(); }

Result<DaemonConfig> ParseDaemonConfigFile(const std::string& path) {
  Result<std::string> text = ReadConfigFile(path);
  if (!text.ok()) return text.status();
  return ParseDaemonConfigText(*text, path);
}

}  // namespace trainerd::daemon
