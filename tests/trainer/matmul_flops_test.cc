// The FLOP count over matrix products, on products whose count is known in closed form.
#include "trainerd/trainer/device/matmul_flops.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

namespace trainerd {
namespace {

TEST(MatmulFlopCounterTest, CountsEachProductOnceFromItsShapes) {
  torch::NoGradGuard no_grad;
  const torch::Tensor a = torch::randn({4, 8}), b = torch::randn({8, 16});
  {
    MatmulFlopCounter counter;
    (void)torch::mm(a, b);                         // 2 * 4 * 8 * 16
    (void)torch::addmm(torch::zeros({16}), a, b);  // the same; the addition is not counted
    (void)torch::bmm(torch::randn({3, 4, 8}), torch::randn({3, 8, 16}));  // 3 x that
    EXPECT_DOUBLE_EQ(counter.flops(), 5 * 1024.0);
    EXPECT_TRUE(counter.uncounted().empty());
  }
  {
    // linear on [2, 5, 8] with a [16, 8] weight: 10 rows of 2 * 8 * 16, counted at the
    // product it reaches, not again at linear or matmul.
    MatmulFlopCounter counter;
    (void)torch::nn::functional::linear(torch::randn({2, 5, 8}), torch::randn({16, 8}),
                                        torch::randn({16}));
    (void)torch::matmul(torch::randn({2, 5, 8}), torch::randn({8, 16}));
    EXPECT_DOUBLE_EQ(counter.flops(), 2 * 2560.0);
  }
  {
    MatmulFlopCounter counter;
    (void)torch::conv2d(torch::randn({1, 2, 6, 6}), torch::randn({3, 2, 3, 3}));
    EXPECT_FALSE(counter.uncounted().empty());  // said, not silently left out
  }
  // Nothing is counted once the counter is gone.
  MatmulFlopCounter later;
  EXPECT_DOUBLE_EQ(later.flops(), 0);
}

}  // namespace
}  // namespace trainerd
