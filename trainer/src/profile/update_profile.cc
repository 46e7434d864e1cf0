#include "trainerd/trainer/profile/update_profile.h"

#include <torch/torch.h>

#include <algorithm>
#include <map>

#include "profile/memory_bandwidth.h"
#include "profile/op_profiler.h"
#include "profile/roofline.h"
#include "trainerd/common/atomic_file.h"
#include "trainerd/trainer/device/device_memory.h"
#include "trainerd/trainer/device/device_timer.h"
#include "trainerd/trainer/device/machine.h"
#include "trainerd/trainer/loop/event_sink.h"
#include "trainerd/trainer/loop/trainer.h"
#include "trainerd/trainer/models/build_model.h"

namespace trainerd {

namespace {

constexpr std::size_t kTopOps = 15;

struct GroupTotals {
  std::int64_t calls = 0;
  double self_seconds = 0, flops = 0, bytes = 0;
};

std::vector<ProfileReport::Group> Groups(const std::vector<OpStats>& ops, const Roof& roof,
                                         double updates, double update_seconds) {
  std::map<OpGroup, GroupTotals> totals;
  for (const OpStats& op : ops) {
    GroupTotals& t = totals[op.group];
    t.calls += op.calls;
    t.self_seconds += op.self_seconds;
    t.flops += op.flops;
    t.bytes += op.bytes;
  }
  std::vector<ProfileReport::Group> groups;
  for (const OpGroup group : kOpGroupNames.Values()) {
    const GroupTotals& t = totals[group];
    const RooflinePoint p = PlaceOnRoofline(roof, t.flops, t.bytes, t.self_seconds);
    groups.push_back({std::string(ToString(group)), t.self_seconds / updates,
                      update_seconds > 0 ? t.self_seconds / updates / update_seconds : 0,
                      static_cast<double>(t.calls) / updates, t.flops / updates, t.bytes / updates,
                      p.intensity, p.achieved_flops, p.achieved_bytes_per_second,
                      p.attainable_flops, p.fraction_of_bound, p.bound});
  }
  return groups;
}

}  // namespace

Result<ProfileReport> ProfileUpdates(const JobSpec& spec, const Dataset& corpus,
                                     const ProfileOptions& options) {
  if (spec.runtime.device != "cpu") {
    return Status::InvalidArgument(
        "--profile times ops on the host, which for a CUDA op is its launch, not its work: "
        "profiling a " +
        spec.runtime.device + " job is not supported yet");
  }
  const OutOfMemoryWatch out_of_memory;
  try {
    NullEventSink discard;
    Trainer trainer(spec, corpus, &discard);
    const torch::Device device = trainer.device();
    // Warm-up: the optimizer state (from the first update that steps), allocator, kernels. A
    // job whose fp16 scaler never steps is profiled as it would run: skipping.
    const int first = trainer.TrainUntilStepped(0).value_or(1);
    const double updates = options.updates;
    // The same number of updates unobserved first: what the observers themselves cost.
    DeviceTimer plain(device);
    for (int u = 0; u < options.updates; ++u) trainer.TrainUpdate(first + u);
    const double unprofiled_update_seconds = plain.Seconds() / updates;
    std::vector<OpStats> ops;
    nlohmann::json trace;
    DeviceTimer timer(device);
    {
      OpProfiler profiler;
      for (int u = 0; u < options.updates; ++u) trainer.TrainUpdate(first + options.updates + u);
      SynchronizeDevice(device);
      profiler.Stop();
      ops = profiler.Ops();
      if (!options.trace_path.empty()) trace = profiler.ChromeTrace();
    }
    const double update_seconds = timer.Seconds() / updates;
    Roof roof;
    {
      // The probes' arrays are larger than a small job's budget; they are not the job's.
      ScopedMemoryLimit lifted(MemoryOf(device), 0);
      roof.peak_flops = PeakFlops(spec.plan.precision, device, options.peak_flops_cache);
      roof.bandwidth_bytes_per_second = MeasureMemoryBandwidth(device);
    }
    ProfileReport report;
    double in_ops = 0;
    for (const OpStats& op : ops) {
      in_ops += op.self_seconds / updates;
      if (report.top_ops.size() < kTopOps) {
        report.top_ops.push_back(
            {op.name, std::string(ToString(op.group)), static_cast<double>(op.calls) / updates,
             op.self_seconds / updates, op.self_seconds / updates / update_seconds});
      }
    }
    if (!options.trace_path.empty()) {
      if (Status s = WriteFileAtomically(options.trace_path, trace.dump()); !s.ok()) return s;
    }
    report.updates = options.updates;
    report.warmup_updates = 1;
    report.update_seconds = update_seconds;
    report.unprofiled_update_seconds = unprofiled_update_seconds;
    report.outside_ops_seconds = std::max(0.0, update_seconds - in_ops);
    report.precision = ToString(spec.plan.precision);
    report.peak_flops = roof.peak_flops;
    if (const std::optional<IsaPeak> isa = IsaRoof(spec.plan.precision, device)) {
      report.isa_peak_flops = isa->flops_per_second;
      report.isa_peak_method = isa->how;
    }
    report.memory_bandwidth_bytes_per_second = roof.bandwidth_bytes_per_second;
    report.ridge_intensity = roof.RidgeIntensity();
    report.groups = Groups(ops, roof, updates, update_seconds);
    if (!options.trace_path.empty()) report.trace_path = options.trace_path;
    report.method =
        "LibTorch RecordFunction observers on the training thread: each op's self time (its "
        "duration less the ops it called), FLOPs of matrix products from their input shapes "
        "and bytes in and out of each aten op called from outside another; per update, after 1 "
        "warm-up update and as many unobserved ones (unprofiled_update_seconds: the "
        "observers' cost is the difference); roofline from the matmul peak probe and a "
        "copy/triad bandwidth probe";
    return report;
  } catch (const std::exception& e) {
    return out_of_memory.StatusOf(e, "profile: " + ModelErrorReason(e));
  }
}

}  // namespace trainerd
