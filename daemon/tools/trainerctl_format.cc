#include "trainerctl_format.h"

#include <algorithm>
#include <sstream>
#include <vector>

#include "trainerd/daemon/json_text.h"
#include "trainerd/trainer/spec/units.h"

namespace trainerd::daemon {

namespace {

using Json = nlohmann::json;

std::string Short(const Json& hash) {
  return hash.is_string() ? hash.get<std::string>().substr(0, 12) : "-";
}

std::string Plan(const Json& plan) {
  if (!plan.is_object()) return "-";
  return std::to_string(plan.value("microbatch", 0)) + " x " +
         std::to_string(plan.value("accumulation_steps", 0)) + " " + plan.value("precision", "") +
         " ckpt " + std::to_string(plan.value("checkpoint_blocks", Json::array()).size()) +
         (plan.value("optimizer_state", "device") == "host" ? " state:host" : "") +
         (plan.value("zero_stage", 0) > 0 ? " zero:" + std::to_string(plan.value("zero_stage", 0))
                                          : "");
}

std::string Duration(const Json& run) {
  if (!run["started_at"].is_number() || !run["ended_at"].is_number()) return "-";
  return FormatDuration(run["ended_at"].get<double>() - run["started_at"].get<double>());
}

// Rows of cells, each column padded to its widest cell.
std::string Table(const std::vector<std::vector<std::string>>& rows) {
  std::vector<std::size_t> widths;
  for (const auto& row : rows) {
    widths.resize(std::max(widths.size(), row.size()));
    for (std::size_t c = 0; c < row.size(); ++c) widths[c] = std::max(widths[c], row[c].size());
  }
  std::ostringstream out;
  for (const auto& row : rows) {
    for (std::size_t c = 0; c < row.size(); ++c) {
      out << row[c];
      if (c + 1 < row.size()) out << std::string(widths[c] - row[c].size() + 2, ' ');
    }
    out << "\n";
  }
  return out.str();
}

// ", 2 ranks: 123.4 samples/s each" for a data-parallel run; "" for one process (and from a
// daemon older than world_size).
// "2.3412 +- 0.0213": a slice's eval loss and its 95% interval (loss +- 1.96 standard
// errors, docs/daemon.md, "Release gate"); the loss alone without a standard error.
std::string LossText(const Json& loss, const Json& standard_error) {
  if (!loss.is_number() || !standard_error.is_number()) return NumberText(loss, "%.4f");
  return NumberText(loss, "%.4f") + " +- " +
         NumberText(1.96 * standard_error.get<double>(), "%.4f");
}

// What a slice's predictions looked like (docs/daemon.md, "Prediction distributions"): the
// mean top-1 probability and normalised entropy of a cross_entropy model (from the
// histograms' bin centres), an mse model's mean and spread; "" without.
std::string PredictionsText(const Json& predictions) {
  if (!predictions.is_object()) return "";
  if (predictions.value("mean", Json()).is_number()) {
    return "outputs " + NumberText(predictions.value("mean", Json()), "%.4g") + " +- " +
           NumberText(predictions.value("spread", Json()), "%.4g");
  }
  const auto centre = [](const Json& bins) -> Json {
    double weighted = 0, total = 0;
    for (std::size_t b = 0; b < bins.size(); ++b) {
      const double count = bins[b].get<double>();
      weighted += count * (static_cast<double>(b) + 0.5) / static_cast<double>(bins.size());
      total += count;
    }
    return total > 0 ? Json(weighted / total) : Json();
  };
  return "top-1 " + NumberText(centre(predictions.value("top1", Json::array())), "%.2f") +
         ", entropy " + NumberText(centre(predictions.value("entropy", Json::array())), "%.2f");
}

// The run's input-quality check in a line (docs/data-quality.md): its verdict and figures,
// or its breaches.
std::string InputQualityText(const Json& run) {
  const Json q = run.value("data_quality", Json());
  if (!q.is_object()) return "not checked";
  std::string text = q.value("pass", false) ? "passed" : "failed";
  text +=
      q.value("reference_run_id", Json()).is_number()
          ? " against run " + std::to_string(q["reference_run_id"].get<std::int64_t>()) + "'s data"
          : " (no release's data to compare with)";
  text += ": " + std::to_string(q.value("train_samples", std::int64_t{0})) + " samples, size " +
          NumberText(q.value("size_ratio", Json()), "%.3f") + ", ids moved " +
          NumberText(q.value("id_divergence", Json()), "%.4f") + " bits, columns " +
          NumberText(q.value("column_shift", Json()), "%.3g") + " spreads, beyond vocabulary " +
          NumberText(q.value("beyond_vocabulary", Json()), "%.4f") + ", NaN/Inf rows " +
          NumberText(q.value("not_finite_rows", Json()), "%.4f");
  for (const Json& breach : q.value("breaches", Json::array())) {
    text += "; " + breach.get<std::string>();
  }
  return text;
}

std::string PerRankText(const Json& run) {
  const int ranks = run.value("world_size", 1);
  if (ranks <= 1) return "";
  return ", " + std::to_string(ranks) +
         " ranks: " + NumberText(run.value("samples_per_second_per_rank", Json()), "%.1f") +
         " samples/s each";
}

std::string Config(const Json& config) {
  if (!config.is_object() || !config.contains("hash")) return "none";
  return Short(config["hash"]) + " (" + config.value("state", "") + ")";
}

// A release's outcomes by slice and metric beside those of the release it replaced, with the
// verdict where `result` has one.
std::string OutcomesTable(const Json& result) {
  std::vector<std::vector<std::string>> rows = {
      {"SLICE", "METRIC", "VALUE", "COUNT", "PREVIOUS", "COUNT", "VERDICT"}};
  const Json previous = result.value("previous_outcomes", Json::array());
  const Json compared = result.contains("verdict") ? result["verdict"]["compared"] : Json::array();
  for (const Json& o : result["outcomes"]) {
    std::vector<std::string> row = {o.value("slice", ""),
                                    o.value("metric", ""),
                                    NumberText(o["value"], "%.6g"),
                                    std::to_string(o.value("count", 0)),
                                    "-",
                                    "-",
                                    "-"};
    for (const Json& p : previous) {
      if (p["slice"] == o["slice"] && p["metric"] == o["metric"]) {
        row[4] = NumberText(p["value"], "%.6g");
        row[5] = std::to_string(p.value("count", 0));
      }
    }
    for (const Json& c : compared) {
      if (c["slice"] == o["slice"] && c["metric"] == o["metric"]) {
        row[6] = c.value("regressed", false)      ? "regressed"
                 : c.value("within_noise", false) ? "ok (worse, within the noise)"
                                                  : "ok";
      }
    }
    rows.push_back(row);
  }
  return rows.size() > 1 ? Table(rows) : "  no outcomes reported\n";
}

}  // namespace

std::string FormatStatus(const Json& s) {
  std::vector<std::vector<std::string>> rows;
  const Json& daemon = s["daemon"];
  if (daemon.is_object() && daemon.value("running", true)) {
    rows.push_back({"daemon", "running, pid " + std::to_string(daemon.value("pid", 0)) +
                                  ", trainerd " + daemon.value("version", "") + ", " +
                                  daemon.value("phase", "")});
  } else {
    rows.push_back({"daemon", "not running (read from the database)"});
  }
  if (const Json& run = s.value("current_run", Json()); run.is_object()) {
    rows.push_back(
        {"current run", std::to_string(run.value("id", 0)) + ": " + run.value("phase", "") +
                            (run.value("updates", 0) > 0
                                 ? ", update " + std::to_string(run.value("update", 0)) + "/" +
                                       std::to_string(run.value("updates", 0)) + ", ETA " +
                                       FormatDuration(run.value("eta_seconds", 0.0))
                                 : "")});
    rows.push_back({"deadline", TimeText(run["deadline"]) + ", margin " +
                                    FormatDuration(run.value("margin_seconds", 0.0))});
  }
  rows.push_back({"next start", TimeText(s.value("next_start", Json()))});
  rows.push_back({"active config", Config(s.value("active_config", Json()))});
  rows.push_back({"last known-good", Config(s.value("last_known_good", Json()))});
  if (const Json& r = s.value("current_release", Json()); r.is_object()) {
    rows.push_back({"current release", std::to_string(r.value("id", 0)) + ": run " +
                                           std::to_string(r.value("run_id", 0)) + ", model " +
                                           Short(r["artifact_sha256"])});
  } else {
    rows.push_back({"current release", "none"});
  }
  if (const Json& run = s.value("last_run", Json()); run.is_object()) {
    rows.push_back(
        {"last run",
         std::to_string(run.value("id", 0)) + " " + run.value("status", "") + ", " +
             NumberText(run["samples_per_second"], "%.1f") + " samples/s, " + "peak " +
             BytesText(run["peak_memory_bytes"].is_object() ? run["peak_memory_bytes"]["peak"]
                                                            : Json()) +
             ", ended " + TimeText(run["ended_at"])});
  }
  return Table(rows);
}

std::string FormatRuns(const Json& result) {
  std::vector<std::vector<std::string>> rows = {
      {"ID", "STATUS", "CONFIG", "PLAN", "SAMPLES/S", "PEAK", "DURATION", "ENDED", "FALLBACK OF"}};
  for (const Json& run : result["runs"]) {
    rows.push_back(
        {std::to_string(run.value("id", 0)), run.value("status", ""), Short(run["config_hash"]),
         Plan(run["plan"]), NumberText(run["samples_per_second"], "%.1f"),
         BytesText(run["peak_memory_bytes"].is_object() ? run["peak_memory_bytes"]["peak"]
                                                        : Json()),
         Duration(run), TimeText(run["ended_at"]),
         run["fallback_of"].is_number() ? std::to_string(run["fallback_of"].get<int>()) : "-"});
  }
  return Table(rows);
}

std::string FormatShow(const Json& result) {
  const Json& run = result["run"];
  const Json& hw = run["hardware"];
  const Json& sw = run["software"];
  std::vector<std::vector<std::string>> rows = {
      {"run", std::to_string(run.value("id", 0))},
      {"status", run.value("status", "")},
      {"config", run.value("config_hash", "")},
      {"fallback of",
       run["fallback_of"].is_number() ? std::to_string(run["fallback_of"].get<int>()) : "-"},
      {"created / started", TimeText(run["created_at"]) + " / " + TimeText(run["started_at"])},
      {"ended / deadline", TimeText(run["ended_at"]) + " / " + TimeText(run["deadline_at"])},
      {"duration", Duration(run)},
      {"plan", run["plan"].is_object()
                   ? Plan(run["plan"]) + " (blocks " + run["plan"]["checkpoint_blocks"].dump() + ")"
                   : "none chosen"},
      {"hardware", hw.value("cpu_model", "") + ", " + std::to_string(hw.value("cpu_cores", 0)) +
                       " cores, " + BytesText(hw["memory_bytes"]) + "; device " +
                       hw.value("device", "") + " " + BytesText(hw["device_memory_bytes"])},
      {"software", "trainerd " + sw.value("trainerd_version", "") + ", LibTorch " +
                       sw.value("libtorch_version", "") + ", " + sw.value("compiler", "")},
      {"blas", sw.value("blas", "")},
      {"shapes", run["shapes"].dump()},
      {"seeds", run["seeds"].dump()},
      {"data", run.value("data_fingerprint", "")},
      {"input quality", InputQualityText(run)},
      {"samples/s", NumberText(run["samples_per_second"], "%.1f") + " (tokens/s " +
                        NumberText(run["tokens_per_second"], "%.0f") + ")" + PerRankText(run)},
      {"throughput method", run.value("throughput_method", "")},
      {"MFU", NumberText(run["mfu"], "%.3f")},
      {"cost per sample", NumberText(run["cost_per_sample"], "%.3g")},
      {"storage", BytesText(run.value("storage_bytes", Json())) + " (state directory " +
                      BytesText(run.value("state_dir_bytes", Json())) + ")"},
      {"final loss", NumberText(run["final_loss"], "%.4f")},
      // value(): a daemon older than the parity check sends no such key.
      {"parity check", run.value("parity_seconds", Json()).is_number()
                           ? FormatDuration(run["parity_seconds"].get<double>())
                           : "not run"},
      {"updates recorded", std::to_string(result.value("updates_recorded", 0))},
  };
  std::string out = Table(rows);
  if (const Json& m = run["peak_memory_bytes"]; m.is_object()) {
    out += "\nmemory at the peak\n";
    std::vector<std::vector<std::string>> memory;
    for (const char* category : {"activations", "optimizer_state", "temporaries", "parameters",
                                 "gradients", "inputs", "peak"}) {
      memory.push_back({std::string("  ") + category, BytesText(m[category])});
    }
    out += Table(memory);
  }
  std::vector<std::vector<std::string>> evals;
  for (const Json& e : result["slice_evals"]) {
    evals.push_back({"  " + e.value("slice", ""), "update " + std::to_string(e.value("update", 0)),
                     LossText(e["loss"], e.value("standard_error", Json())),
                     "simple baseline " + NumberText(e.value("baseline_loss", Json()), "%.4f"),
                     PredictionsText(e.value("predictions", Json()))});
  }
  if (!evals.empty()) out += "\neval loss by slice\n" + Table(evals);
  std::vector<std::vector<std::string>> events;
  for (const Json& e : result["events"]) {
    events.push_back({"  " + TimeText(e["at"]), e.value("severity", ""), e.value("kind", ""),
                      e.value("message", "")});
  }
  if (!events.empty()) out += "\nevents\n" + Table(events);
  if (const Json& release = result.value("release", Json()); release.is_object()) {
    out += "\nrelease " + std::to_string(release.value("id", 0)) + ": model " +
           Short(release["artifact_sha256"]) +
           (release.value("current", false) ? ", current" : ", not current") +
           (release["withdrawn"].is_object() ? ", withdrawn" : "") + "\n" + OutcomesTable(result);
  }
  return out;
}

std::string FormatConfigs(const Json& result) {
  const std::string active = result["active"].value("hash", "");
  std::vector<std::vector<std::string>> rows = {{"HASH", "STATE", "FIRST SEEN", "ACTIVE"}};
  for (const Json& c : result["configs"]) {
    rows.push_back({Short(c["hash"]), c.value("state", ""), TimeText(c["first_seen"]),
                    c.value("hash", "") == active ? "*" : ""});
  }
  return Table(rows);
}

std::string FormatRelease(const Json& result) {
  const Json& r = result["release"];
  std::ostringstream out;
  out << "release " << r.value("id", 0) << " of run " << r.value("run_id", 0) << ": model "
      << Short(r["artifact_sha256"]) << (r.value("current", false) ? ", current" : "")
      << (r.value("pinned", false) ? ", pinned" : "") << "\n";
  out << "  gate " << (r.value("gate_passed", false) ? "passed" : "failed") << ", live since "
      << TimeText(r["live_at"]) << ", replaced release "
      << (r["previous_release"].is_number() ? std::to_string(r["previous_release"].get<int>())
                                            : std::string("-"))
      << "\n";
  if (r["withdrawn"].is_object()) {
    out << "  withdrawn at " << TimeText(r["withdrawn"]["at"])
        << " after its outcomes regressed; release " << r["withdrawn"].value("rolled_back_to", 0)
        << " current again\n";
  }
  if (result.contains("run")) {
    const Json& run = result["run"];
    out << "  config " << Short(run["config_hash"]) << ", data " << Short(run["data_fingerprint"])
        << ", trainerd " << run["software"].value("trainerd_version", "-") << ", "
        << Plan(run["plan"]) << "\n";
    const Json& peak = run["peak_memory_bytes"];
    out << "  peak " << BytesText(peak.is_object() ? peak["peak"] : Json()) << ", "
        << NumberText(run["samples_per_second"], "%.1f") << " samples/s, cost per sample "
        << NumberText(run["cost_per_sample"], "%.3g") << "\n";
    out << "  input quality " << InputQualityText(run) << "\n";
  }
  if (result.contains("slice_losses") && !result["slice_losses"].empty()) {
    out << "  eval loss";
    for (const auto& [slice, loss] : result["slice_losses"].items()) {
      out << " " << slice << " " << NumberText(loss, "%.4f");
    }
    out << "\n";
  }
  out << OutcomesTable(result);
  if (result.contains("verdict")) {
    for (const Json& w : result["verdict"]["waiting"]) {
      out << "  waiting: " << w.get<std::string>() << "\n";
    }
  }
  return out.str();
}

}  // namespace trainerd::daemon
