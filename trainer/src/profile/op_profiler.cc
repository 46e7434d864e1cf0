#include "profile/op_profiler.h"

#include <torch/torch.h>

#include <algorithm>

#include "trainerd/trainer/device/matmul_flops.h"

namespace trainerd {

namespace {

thread_local OpProfiler* active = nullptr;

// Trace events beyond this many are dropped (the table still counts them): a Chrome trace of
// a few updates stays a file a browser opens.
constexpr std::size_t kMaxTraceEvents = 200'000;

bool Has(std::string_view name, std::string_view part) {
  return name.find(part) != std::string_view::npos;
}

double TensorBytes(const c10::IValue& value) {
  if (value.isTensor()) {
    const at::Tensor& t = value.toTensor();
    return t.defined() ? static_cast<double>(t.numel()) * static_cast<double>(t.element_size()) : 0;
  }
  if (value.isTensorList()) {
    double bytes = 0;
    for (const at::Tensor& t : value.toTensorVector()) {
      if (t.defined())
        bytes += static_cast<double>(t.numel()) * static_cast<double>(t.element_size());
    }
    return bytes;
  }
  return 0;
}

}  // namespace

struct OpProfiler::Frame {
  std::string name;
  std::string scope;  // innermost trainerd:: user scope, "" for none
  std::chrono::steady_clock::time_point start;
  double children_seconds = 0;
  double flops = 0;          // counted: a matrix product
  bool inside_aten = false;  // called by another aten:: op, whose bytes include its own
  double input_bytes = 0;
};

OpGroup GroupOf(std::string_view name, std::string_view scope) {
  if (scope == kOptimizerScope) return OpGroup::kOptimizer;
  if (scope == kDropoutScope) return OpGroup::kDropout;
  if (scope == kAttentionScope) return OpGroup::kAttention;
  if (Has(name, "dropout") || Has(name, "Dropout") || Has(name, "bernoulli")) {
    return OpGroup::kDropout;
  }
  if (Has(name, "log_softmax") || Has(name, "LogSoftmax")) return OpGroup::kOther;  // the loss
  if (Has(name, "softmax") || Has(name, "Softmax") || Has(name, "masked_fill") ||
      Has(name, "MaskedFill") || Has(name, "scaled_dot_product") || Has(name, "ScaledDotProduct")) {
    return OpGroup::kAttention;
  }
  if (Has(name, "layer_norm") || Has(name, "LayerNorm") || Has(name, "batch_norm") ||
      Has(name, "BatchNorm") || Has(name, "group_norm") || Has(name, "GroupNorm")) {
    return OpGroup::kNormalisation;
  }
  for (std::string_view product :
       {"aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm", "aten::matmul", "aten::linear"}) {
    if (name == product) return OpGroup::kMatrixProducts;
  }
  for (std::string_view node :
       {"MmBackward", "AddmmBackward", "BmmBackward", "BaddbmmBackward", "LinearBackward"}) {
    if (name.rfind(node, 0) == 0) return OpGroup::kMatrixProducts;  // MmBackward0, ...
  }
  return OpGroup::kOther;
}

OpProfiler::OpProfiler() {
  TORCH_CHECK(active == nullptr, "one OpProfiler per thread at a time");
  active = this;
  started_ = std::chrono::steady_clock::now();
  handle_ = at::addThreadLocalCallback(
      at::RecordFunctionCallback(&OpProfiler::OnStart, &OpProfiler::OnEnd)
          .needsInputs(true)
          .needsOutputs(true));
  observing_ = true;
}

OpProfiler::~OpProfiler() { Stop(); }

void OpProfiler::Stop() {
  if (!observing_) return;
  at::removeCallback(handle_);
  observing_ = false;
  active = nullptr;
}

std::unique_ptr<at::ObserverContext> OpProfiler::OnStart(const at::RecordFunction& op) {
  if (active == nullptr) return nullptr;
  Frame frame;
  frame.name = op.name();
  frame.scope = frame.name.rfind("trainerd::", 0) == 0 ? frame.name
                : active->stack_.empty()               ? std::string()
                                                       : active->stack_.back().scope;
  frame.flops = MatmulFlopsOf(op);
  if (!active->stack_.empty()) {
    const Frame& caller = active->stack_.back();
    frame.inside_aten = caller.inside_aten || caller.name.rfind("aten::", 0) == 0;
  }
  for (const c10::IValue& input : op.inputs()) frame.input_bytes += TensorBytes(input);
  frame.start = std::chrono::steady_clock::now();
  active->stack_.push_back(std::move(frame));
  return nullptr;
}

void OpProfiler::OnEnd(const at::RecordFunction& op, at::ObserverContext* /*context*/) {
  if (active == nullptr || active->stack_.empty()) return;
  const auto end = std::chrono::steady_clock::now();
  Frame frame = std::move(active->stack_.back());
  active->stack_.pop_back();
  const double seconds = std::chrono::duration<double>(end - frame.start).count();
  if (!active->stack_.empty()) {
    active->stack_.back().children_seconds += seconds;
  }
  OpStats& stats = active->ops_[frame.name];
  stats.name = frame.name;
  stats.group = GroupOf(frame.name, frame.scope);
  stats.calls += 1;
  stats.self_seconds += std::max(0.0, seconds - frame.children_seconds);
  // FLOPs where the product is; bytes once, at the aten:: op the model, autograd or the
  // optimizer called (what it reads and writes; the ops inside it work on the same tensors).
  stats.flops += frame.flops;
  if (!frame.inside_aten && frame.name.rfind("aten::", 0) == 0) {
    double output_bytes = 0;
    for (const c10::IValue& output : op.outputs()) output_bytes += TensorBytes(output);
    stats.bytes += frame.input_bytes + output_bytes;
  }
  if (active->trace_.size() < kMaxTraceEvents) {
    const double start_us =
        std::chrono::duration<double, std::micro>(frame.start - active->started_).count();
    active->trace_.push_back({{"name", frame.name},
                              {"cat", std::string(ToString(stats.group))},
                              {"ph", "X"},
                              {"ts", start_us},
                              {"dur", seconds * 1e6},
                              {"pid", 1},
                              {"tid", 1}});
  }
}

std::vector<OpStats> OpProfiler::Ops() const {
  std::vector<OpStats> ops;
  for (const auto& [name, stats] : ops_) ops.push_back(stats);
  std::sort(ops.begin(), ops.end(),
            [](const OpStats& a, const OpStats& b) { return a.self_seconds > b.self_seconds; });
  return ops;
}

nlohmann::json OpProfiler::ChromeTrace() const {
  return {{"traceEvents", trace_}, {"displayTimeUnit", "ms"}};
}

}  // namespace trainerd
