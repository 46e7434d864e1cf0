// Counts the floating-point operations of the matrix products a piece of code runs on this
// thread, from the shapes of their inputs as LibTorch's dispatcher records them (a
// thread-local RecordFunction callback): 2 n k m for each aten::mm / addmm ([n, k] x [k, m]),
// 2 b n k m for each aten::bmm / baddbmm. Higher-level ops (linear, matmul, einsum,
// scaled_dot_product_attention on the CPU) reach one of these, so they are counted once, at
// the product. Convolutions are not counted: `uncounted()` names them, so that a caller can
// say the count is incomplete rather than report it. How a TorchScript model's FLOPs per
// sample are measured when the job does not give them (throughput.h). One counter per thread
// at a time.
#pragma once

#include <ATen/record_function.h>

#include <set>
#include <string>

namespace trainerd {

// The FLOPs of `op` when it is one of the products above, from its recorded inputs (the
// callback must ask for them); 0 for any other op.
double MatmulFlopsOf(const at::RecordFunction& op);

class MatmulFlopCounter {
 public:
  MatmulFlopCounter();
  ~MatmulFlopCounter();
  MatmulFlopCounter(const MatmulFlopCounter&) = delete;
  MatmulFlopCounter& operator=(const MatmulFlopCounter&) = delete;

  double flops() const { return flops_; }
  // Ops that compute but are not counted ("aten::convolution"); empty when the count is whole.
  const std::set<std::string>& uncounted() const { return uncounted_; }

 private:
  static std::unique_ptr<at::ObserverContext> OnStart(const at::RecordFunction& op);
  at::CallbackHandle handle_;
  double flops_ = 0;
  std::set<std::string> uncounted_;
};

}  // namespace trainerd
