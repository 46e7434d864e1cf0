#include "trainerd/trainer/spec/profile_text.h"

#include <cstdio>

namespace trainerd {

namespace {

double Num(const nlohmann::json& j, const char* key) {
  const auto it = j.find(key);
  return it != j.end() && it->is_number() ? it->get<double>() : 0.0;
}

std::string Str(const nlohmann::json& j, const char* key) {
  const auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
}

}  // namespace

std::string ProfileText(const nlohmann::json& p) {
  std::string out;
  char line[256];
  std::snprintf(line, sizeof line,
                "op profile of %.0f updates after %.0f warm-up: %.4g s per update profiled, "
                "%.4g s without the observers, %s\n",
                Num(p, "updates"), Num(p, "warmup_updates"), Num(p, "update_seconds"),
                Num(p, "unprofiled_update_seconds"), Str(p, "precision").c_str());
  out += line;
  std::snprintf(line, sizeof line,
                "roofline: peak %.3g FLOP/s, memory bandwidth %.3g B/s, ridge %.3g FLOP/B\n",
                Num(p, "peak_flops"), Num(p, "memory_bandwidth_bytes_per_second"),
                Num(p, "ridge_intensity"));
  out += line;
  std::snprintf(line, sizeof line, "  %-16s %9s %6s %8s %10s %10s %9s  %s\n", "group", "self s",
                "share", "calls", "FLOP/B", "FLOP/s", "of bound", "bound");
  out += line;
  for (const nlohmann::json& g : p.value("groups", nlohmann::json::array())) {
    std::snprintf(line, sizeof line, "  %-16s %9.4g %5.1f%% %8.0f %10.3g %10.3g %8.1f%%  %s\n",
                  Str(g, "group").c_str(), Num(g, "self_seconds"), 100 * Num(g, "share"),
                  Num(g, "calls"), Num(g, "intensity"), Num(g, "achieved_flops"),
                  100 * Num(g, "fraction_of_bound"), Str(g, "bound").c_str());
    out += line;
  }
  std::snprintf(line, sizeof line, "  %-16s %9.4g\ntop ops:\n", "outside ops",
                Num(p, "outside_ops_seconds"));
  out += line;
  for (const nlohmann::json& op : p.value("top_ops", nlohmann::json::array())) {
    std::snprintf(line, sizeof line, "  %-40s %-16s %6.0f calls %9.4g s %5.1f%%\n",
                  Str(op, "name").c_str(), Str(op, "group").c_str(), Num(op, "calls"),
                  Num(op, "self_seconds"), 100 * Num(op, "share"));
    out += line;
  }
  if (!Str(p, "trace_path").empty()) out += "trace: " + Str(p, "trace_path") + "\n";
  return out;
}

}  // namespace trainerd
