#include "trainerd/trainer/device/matmul_flops.h"

#include <torch/torch.h>

#include <cstring>

namespace trainerd {
namespace {

thread_local MatmulFlopCounter* active = nullptr;

// The sizes of input `index` of `op`, or empty when it is not a tensor.
std::vector<std::int64_t> SizesOf(const at::RecordFunction& op, std::size_t index) {
  const c10::ArrayRef<const c10::IValue> inputs = op.inputs();
  if (index >= inputs.size() || !inputs[index].isTensor()) return {};
  return inputs[index].toTensor().sizes().vec();
}

// 2 n k m for [.., n, k] x [.., k, m], times the batch of a 3-d product.
double ProductFlops(const std::vector<std::int64_t>& a, const std::vector<std::int64_t>& b) {
  if (a.size() < 2 || b.size() < 2 || a.size() != b.size()) return 0;
  double flops = 2.0 * static_cast<double>(a[a.size() - 2]) * static_cast<double>(a.back()) *
                 static_cast<double>(b.back());
  if (a.size() == 3) flops *= static_cast<double>(a[0]);
  return flops;
}

}  // namespace

double MatmulFlopsOf(const at::RecordFunction& op) {
  const char* name = op.name();
  if (std::strcmp(name, "aten::mm") == 0 || std::strcmp(name, "aten::bmm") == 0) {
    return ProductFlops(SizesOf(op, 0), SizesOf(op, 1));
  }
  if (std::strcmp(name, "aten::addmm") == 0 || std::strcmp(name, "aten::baddbmm") == 0) {
    return ProductFlops(SizesOf(op, 1), SizesOf(op, 2));  // input 0 is added
  }
  return 0;
}

MatmulFlopCounter::MatmulFlopCounter() {
  TORCH_CHECK(active == nullptr, "one MatmulFlopCounter per thread at a time");
  active = this;
  handle_ = at::addThreadLocalCallback(
      at::RecordFunctionCallback(&MatmulFlopCounter::OnStart).needsInputs(true));
}

MatmulFlopCounter::~MatmulFlopCounter() {
  at::removeCallback(handle_);
  active = nullptr;
}

std::unique_ptr<at::ObserverContext> MatmulFlopCounter::OnStart(const at::RecordFunction& op) {
  if (active == nullptr) return nullptr;
  const char* name = op.name();
  active->flops_ += MatmulFlopsOf(op);
  if (std::strstr(name, "convolution") != nullptr || std::strstr(name, "conv1d") != nullptr ||
      std::strstr(name, "conv2d") != nullptr || std::strstr(name, "conv3d") != nullptr) {
    active->uncounted_.insert(name);
  }
  return nullptr;
}

}  // namespace trainerd
