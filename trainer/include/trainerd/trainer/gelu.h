// GELU in its exact (erf) form, x * (1 + erf(x / sqrt 2)) / 2, what torch::nn::GELU() computes,
// as one vectorised pass forward and one backward (float_lanes.h), for CPU float and bfloat16
// tensors: LibTorch 1.13's CPU kernels evaluate erf one element at a time, which made GELU and
// its backward 14 % of a GPT update (docs/benchmarks.md). erf is Abramowitz and Stegun's 7.1.26
// (absolute error below 1.5e-7), the approximation LibTorch's own vectorised erf uses. Keeps
// its input for backward, as LibTorch's GELU does.
#pragma once

#include <torch/types.h>

namespace trainerd {

// Whether VectorGelu takes `x`: a CPU float or bfloat16 tensor.
bool VectorGeluSupports(const torch::Tensor& x);

torch::Tensor VectorGelu(const torch::Tensor& x);

}  // namespace trainerd
