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

namespace trainerd {

namespace {

constexpr std::size_t kTopOps = 15;

struct GroupTotals {
  std::int64_t calls = 0;
  double self_seconds = 0, flops = 0, bytes = 0;
};

nlohmann::json GroupsJson(const std::vector<OpStats>& ops, const Roof& roof, double updates,
                          double update_seconds) {
  std::map<OpGroup, GroupTotals> totals;
  for (const OpStats& op : ops) {
    GroupTotals& t = totals[op.group];
    t.calls += op.calls;
    t.self_seconds += op.self_seconds;
    t.flops += op.flops;
    t.bytes += op.bytes;
  }
  nlohmann::json groups = nlohmann::json::array();
  for (const OpGroup group : kOpGroups) {
    const GroupTotals& t = totals[group];
    const RooflinePoint p = PlaceOnRoofline(roof, t.flops, t.bytes, t.self_seconds);
    groups.push_back({{"group", std::string(ToString(group))},
                      {"self_seconds", t.self_seconds / updates},
                      {"share", update_seconds > 0 ? t.self_seconds / updates / update_seconds : 0},
                      {"calls", static_cast<double>(t.calls) / updates},
                      {"flops", t.flops / updates},
                      {"bytes", t.bytes / updates},
                      {"intensity", p.intensity},
                      {"achieved_flops", p.achieved_flops},
                      {"achieved_bytes_per_second", p.achieved_bytes_per_second},
                      {"attainable_flops", p.attainable_flops},
                      {"fraction_of_bound", p.fraction_of_bound},
                      {"bound", p.bound}});
  }
  return groups;
}

}  // namespace

Result<nlohmann::json> ProfileUpdates(const JobSpec& spec, const Dataset& corpus,
                                      const ProfileOptions& options) {
  if (spec.runtime.device != "cpu") {
    return Status::InvalidArgument(
        "--profile times ops on the host, which for a CUDA op is its launch, not its work: "
        "profiling a " +
        spec.runtime.device + " job is not supported yet");
  }
  try {
    NullEventSink discard;
    Trainer trainer(spec, corpus, &discard);
    const torch::Device device = trainer.device();
    trainer.TrainUpdate(0);  // warm-up: optimizer state, allocator, kernels
    const double updates = options.updates;
    // The same number of updates unobserved first: what the observers themselves cost.
    DeviceTimer plain(device);
    for (int u = 1; u <= options.updates; ++u) trainer.TrainUpdate(u);
    const double unprofiled_update_seconds = plain.Seconds() / updates;
    std::vector<OpStats> ops;
    nlohmann::json trace;
    DeviceTimer timer(device);
    {
      OpProfiler profiler;
      for (int u = 1; u <= options.updates; ++u) trainer.TrainUpdate(options.updates + u);
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
    double in_ops = 0;
    nlohmann::json top = nlohmann::json::array();
    for (const OpStats& op : ops) {
      in_ops += op.self_seconds / updates;
      if (top.size() < kTopOps) {
        top.push_back({{"name", op.name},
                       {"group", std::string(ToString(op.group))},
                       {"calls", static_cast<double>(op.calls) / updates},
                       {"self_seconds", op.self_seconds / updates},
                       {"share", op.self_seconds / updates / update_seconds}});
      }
    }
    if (!options.trace_path.empty()) {
      if (Status s = WriteFileAtomically(options.trace_path, trace.dump()); !s.ok()) return s;
    }
    return nlohmann::json{
        {"updates", options.updates},
        {"warmup_updates", 1},
        {"update_seconds", update_seconds},
        {"unprofiled_update_seconds", unprofiled_update_seconds},
        {"outside_ops_seconds", std::max(0.0, update_seconds - in_ops)},
        {"precision", ToString(spec.plan.precision)},
        {"peak_flops", roof.peak_flops},
        {"memory_bandwidth_bytes_per_second", roof.bandwidth_bytes_per_second},
        {"ridge_intensity", roof.RidgeIntensity()},
        {"groups", GroupsJson(ops, roof, updates, update_seconds)},
        {"top_ops", top},
        {"trace_path",
         options.trace_path.empty() ? nlohmann::json(nullptr) : nlohmann::json(options.trace_path)},
        {"method",
         "LibTorch RecordFunction observers on the training thread: each op's self time (its "
         "duration less the ops it called), FLOPs of matrix products from their input shapes "
         "and bytes in and out of each aten op called from outside another; per update, after 1 "
         "warm-up update and as many unobserved ones (unprofiled_update_seconds: the "
         "observers' cost is the difference); roofline from the matmul peak probe and a "
         "copy/triad bandwidth probe"}};
  } catch (const c10::Error& e) {
    return Status::Internal(std::string("profile: ") + e.what_without_backtrace());
  }
}

}  // namespace trainerd
