// Profiles the LibTorch ops this thread runs, through LibTorch's RecordFunction observers
// (the hooks its autograd profiler is made of): per op, calls and self time (its own duration
// less that of the ops it called); the FLOPs of matrix products (matmul_flops.h) where the
// product is; the bytes of the tensors in and out of each aten:: op called from outside
// another one (by the model, autograd or the optimizer), once, not again for the ops inside; and
// every op as an event of a Chrome trace, which Perfetto and chrome://tracing open. Ops are timed
// on the host: on the CPU that is their run time; a CUDA op's would be its launch, so the trainer
// profiles CPU jobs only. Backward runs on the calling thread for CPU tensors, so it is observed
// too. One profiler per thread at a time.
#pragma once

#include <ATen/record_function.h>

#include <chrono>
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "trainerd/common/enum_names.h"
#include "trainerd/trainer/device/op_scopes.h"

namespace trainerd {

enum class OpGroup { kMatrixProducts, kAttention, kDropout, kNormalisation, kOptimizer, kOther };
// Every group in report order, with its name.
inline constexpr EnumNames<OpGroup, 6> kOpGroupNames{{{
    {OpGroup::kMatrixProducts, "matrix products"},
    {OpGroup::kAttention, "attention"},
    {OpGroup::kDropout, "dropout"},
    {OpGroup::kNormalisation, "normalisation"},
    {OpGroup::kOptimizer, "optimizer"},
    {OpGroup::kOther, "other"},
}}};
inline std::string_view ToString(OpGroup group) { return kOpGroupNames.Name(group); }

// The group of op `name` run inside user scope `scope` (the innermost trainerd:: scope, or ""):
// the scope's group, else by name (mm, addmm, bmm, baddbmm, matmul, linear and their backward
// nodes; softmax (not the loss's log-softmax), masking and scaled dot-product attention;
// dropout and bernoulli; layer,
// batch and group norm), else other.
OpGroup GroupOf(std::string_view name, std::string_view scope);

struct OpStats {
  std::string name;
  OpGroup group = OpGroup::kOther;
  std::int64_t calls = 0;
  double self_seconds = 0;
  double flops = 0;  // counted matrix-product FLOPs
  double bytes = 0;  // tensor bytes in and out, when called from outside another aten:: op
};

class OpProfiler {
 public:
  // Observes from now until Stop() or destruction. REQUIRES: no other profiler on this thread.
  OpProfiler();
  ~OpProfiler();
  OpProfiler(const OpProfiler&) = delete;
  OpProfiler& operator=(const OpProfiler&) = delete;

  void Stop();
  // Every op seen, by self time, longest first.
  std::vector<OpStats> Ops() const;
  // {"traceEvents": [...], "displayTimeUnit": "ms"}: one complete event ("ph": "X", times
  // in microseconds from the start) per op, its group as the category.
  nlohmann::json ChromeTrace() const;

 private:
  struct Frame;
  static std::unique_ptr<at::ObserverContext> OnStart(const at::RecordFunction& op);
  static void OnEnd(const at::RecordFunction& op, at::ObserverContext* context);

  at::CallbackHandle handle_ = 0;
  bool observing_ = false;
  std::chrono::steady_clock::time_point started_;
  std::vector<Frame> stack_;
  std::map<std::string, OpStats> ops_;
  nlohmann::json trace_ = nlohmann::json::array();
};

}  // namespace trainerd
