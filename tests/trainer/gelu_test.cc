// VectorGelu against LibTorch's exact GELU, forward and backward, in float and bfloat16.
#include "trainerd/trainer/gelu.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "trainerd/trainer/gpt.h"

namespace trainerd {
namespace {

double MaxDifference(const torch::Tensor& a, const torch::Tensor& b) {
  return (a.to(torch::kDouble) - b.to(torch::kDouble)).abs().max().item<double>();
}

// Every float from -12 to 12 in steps of 1/1024 (both tails, 0 and the region erf bends in),
// laid out [x, y] and taken transposed, so the input is not contiguous; 24,577 values, more
// than one chunk and one thread's share.
torch::Tensor Inputs(torch::Dtype dtype) {
  return torch::arange(-12.0, 12.0 + 1.0 / 2048, 1.0 / 1024)
      .view({-1, 1})
      .repeat({1, 3})
      .t()
      .to(dtype);
}

TEST(VectorGeluTest, EqualsLibTorchsExactGeluInFloat) {
  const torch::Tensor x = Inputs(torch::kFloat).requires_grad_();
  const torch::Tensor reference_x = x.detach().clone().requires_grad_();
  const torch::Tensor y = VectorGelu(x);
  const torch::Tensor expected = torch::gelu(reference_x);
  EXPECT_LE(MaxDifference(y, expected), 2e-6);
  const torch::Tensor upstream = torch::randn_like(expected);
  (y * upstream).sum().backward();
  (expected * upstream).sum().backward();
  EXPECT_LE(MaxDifference(x.grad(), reference_x.grad()),
            2e-6 * upstream.abs().max().item<double>());
}

TEST(VectorGeluTest, Bfloat16IsWithinItsRoundingOfTheExactGelu) {
  const torch::Tensor x = Inputs(torch::kBFloat16).requires_grad_();
  const torch::Tensor y = VectorGelu(x);
  EXPECT_EQ(y.scalar_type(), torch::kBFloat16);
  const torch::Tensor exact = torch::gelu(x.detach().to(torch::kDouble));
  // bf16 keeps 8 bits of mantissa: half an ulp is 2^-9 relative.
  EXPECT_LE(((y.detach().to(torch::kDouble) - exact).abs() / exact.abs().clamp_min(1e-3))
                .max()
                .item<double>(),
            1.0 / 256);
  y.sum().backward();
  EXPECT_EQ(x.grad().scalar_type(), torch::kBFloat16);
  const torch::Tensor reference_x = x.detach().to(torch::kDouble).requires_grad_();
  torch::gelu(reference_x).sum().backward();
  EXPECT_LE(MaxDifference(x.grad(), reference_x.grad()), 1.0 / 128);
}

TEST(VectorGeluTest, RefusesWhatItDoesNotTake) {
  EXPECT_FALSE(VectorGeluSupports(torch::zeros({4}, torch::kDouble)));
  EXPECT_THROW(VectorGelu(torch::zeros({4}, torch::kDouble)), c10::Error);
}

// A checkpoint written under one kernel setting resumes under the other: the MLP's activation
// has no parameters under either, so the names are the same.
TEST(VectorGeluTest, TheGptsParameterNamesDoNotDependOnItsKernels) {
  GptOptions options;
  options.n_layer = 2;
  options.n_embd = 16;
  options.n_head = 2;
  options.block_size = 8;
  options.kernels = GptKernels::kFused;
  const Gpt fused(options);
  options.kernels = GptKernels::kExplicit;
  const Gpt explicit_kernels(options);
  EXPECT_EQ(fused.named_parameters().keys(), explicit_kernels.named_parameters().keys());
}

}  // namespace
}  // namespace trainerd
