#include "trainerd/trainer/spec/profile_text.h"

#include <cstdio>

namespace trainerd {

std::string ProfileText(const ProfileReport& p) {
  std::string out;
  char line[256];
  std::snprintf(line, sizeof line,
                "op profile of %d updates after %d warm-up: %.4g s per update profiled, "
                "%.4g s without the observers, %s\n",
                p.updates, p.warmup_updates, p.update_seconds, p.unprofiled_update_seconds,
                p.precision.c_str());
  out += line;
  std::snprintf(line, sizeof line,
                "roofline: peak %.3g FLOP/s, memory bandwidth %.3g B/s, ridge %.3g FLOP/B\n",
                p.peak_flops, p.memory_bandwidth_bytes_per_second, p.ridge_intensity);
  out += line;
  if (p.isa_peak_flops) {
    std::snprintf(line, sizeof line,
                  "instruction set's roof: %.3g FLOP/s (%s); measured peak %.0f%% of it\n",
                  *p.isa_peak_flops, p.isa_peak_method.value_or("").c_str(),
                  100 * p.peak_flops / *p.isa_peak_flops);
    out += line;
  }
  std::snprintf(line, sizeof line, "  %-16s %9s %6s %8s %10s %10s %9s  %s\n", "group", "self s",
                "share", "calls", "FLOP/B", "FLOP/s", "of bound", "bound");
  out += line;
  for (const ProfileReport::Group& g : p.groups) {
    std::snprintf(line, sizeof line, "  %-16s %9.4g %5.1f%% %8.0f %10.3g %10.3g %8.1f%%  %s\n",
                  g.group.c_str(), g.self_seconds, 100 * g.share, g.calls, g.intensity,
                  g.achieved_flops, 100 * g.fraction_of_bound, g.bound.c_str());
    out += line;
  }
  std::snprintf(line, sizeof line, "  %-16s %9.4g\ntop ops:\n", "outside ops",
                p.outside_ops_seconds);
  out += line;
  for (const ProfileReport::Op& op : p.top_ops) {
    std::snprintf(line, sizeof line, "  %-40s %-16s %6.0f calls %9.4g s %5.1f%%\n", op.name.c_str(),
                  op.group.c_str(), op.calls, op.self_seconds, 100 * op.share);
    out += line;
  }
  if (p.trace_path && !p.trace_path->empty()) out += "trace: " + *p.trace_path + "\n";
  return out;
}

}  // namespace trainerd
