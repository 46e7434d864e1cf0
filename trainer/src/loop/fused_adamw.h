// AdamW whose step is LibTorch's fused kernel (at::_fused_adamw_, LibTorch 2.4 and later: one
// vectorised pass over each tensor, on the CPU and on CUDA) instead of torch::optim::AdamW's
// ten elementwise passes with their temporaries. The arithmetic, the options and the state
// (AdamWParamState: step, exp_avg, exp_avg_sq) are AdamW's, so training checkpoints, the
// ledger's optimizer bytes and the parity check see AdamW. Under older LibTorch, and with
// amsgrad, it is torch::optim::AdamW.
#pragma once

#include <torch/torch.h>

#include "trainerd/trainer/device/torch_compat.h"

namespace trainerd {

class FusedAdamW : public torch::optim::AdamW {
 public:
  using torch::optim::AdamW::AdamW;
#if TRAINERD_TORCH_AT_LEAST(2, 4)
  torch::Tensor step(LossClosure closure = nullptr) override;
#endif
};

}  // namespace trainerd
