// trainer-run --profile: where an optimizer update of the plan spends its time. One warm-up
// update, `updates` updates timed without observers (unprofiled_update_seconds), then as many
// under the op profiler (op_profiler.h), timed between device synchronisations: the shares are
// of the profiled update, which the observers make longer, by much for a model of tiny ops. The
// summary, per update: each op group's self time, share of the update, calls, counted FLOPs and
// bytes, placed on this device's roofline (its measured matmul peak in the plan's precision and its
// memory bandwidth, roofline.h); the time outside any op; the 15 ops with the most self time. A
// Chrome trace of the profiled updates goes to `trace_path` (none when empty). CPU jobs only
// (InvalidArgument on CUDA: ops are timed on the host, which for a CUDA op is its launch).
#pragma once

#include <string>

#include "trainerd/common/status.h"
#include "trainerd/trainer/data/dataset.h"
#include "trainerd/trainer/spec/job_spec.h"
#include "trainerd/trainer/spec/worker_protocol.h"

namespace trainerd {

struct ProfileOptions {
  int updates = 3;               // profiled updates, after one warm-up
  std::string trace_path;        // the Chrome trace file; "" for none
  std::string peak_flops_cache;  // throughput.h's cache; "" measures afresh
};

Result<ProfileReport> ProfileUpdates(const JobSpec& spec, const Dataset& corpus,
                                     const ProfileOptions& options);

}  // namespace trainerd
