// BatchedProduct against LibTorch's bmm on the views the blockwise attention multiplies:
// row-major and transposed operands, strided batches, slices of wider rows, accumulation, and
// the dtypes it leaves to bmm.
#include "trainerd/trainer/device/batched_product.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

namespace trainerd {
namespace {

double MaxDifference(const torch::Tensor& a, const torch::Tensor& b) {
  return (a.to(torch::kDouble) - b.to(torch::kDouble)).abs().max().item<double>();
}

// [n, rows, cols] with the rows of a wider, transposed or batch-interleaved storage.
struct Operand {
  const char* name;
  torch::Tensor (*make)(std::int64_t n, std::int64_t rows, std::int64_t cols);
};

const Operand kOperands[] = {
    {"contiguous",
     [](std::int64_t n, std::int64_t r, std::int64_t c) {
       return torch::randn({n, r, c});
     }},
    {"transposed",
     [](std::int64_t n, std::int64_t r, std::int64_t c) {
       return torch::randn({n, c, r}).transpose(1, 2);
     }},
    {"columns of wider rows",
     [](std::int64_t n, std::int64_t r, std::int64_t c) {
       return torch::randn({n, r, 3 * c + 5}).narrow(2, c, c);
     }},
    {"heads interleaved in rows",
     [](std::int64_t n, std::int64_t r, std::int64_t c) {
       return torch::randn({r, n, c}).transpose(0, 1);
     }},
};

TEST(BatchedProductTest, EqualsBmmForEveryLayoutOfEitherOperand) {
  torch::manual_seed(3);
  for (const Operand& a_layout : kOperands) {
    for (const Operand& b_layout : kOperands) {
      for (const bool accumulate : {false, true}) {
        SCOPED_TRACE(std::string(a_layout.name) + " @ " + b_layout.name +
                     (accumulate ? ", accumulated" : ""));
        const torch::Tensor a = a_layout.make(5, 64, 32), b = b_layout.make(5, 32, 48);
        ASSERT_TRUE(BatchedProductIsDirect(torch::empty({5, 64, 48}), a, b));
        const torch::Tensor start = torch::randn({5, 64, 48});
        torch::Tensor c = start.clone();
        BatchedProduct(c, a, b, accumulate);
        const torch::Tensor expected =
            (accumulate ? start : torch::zeros_like(start)).to(torch::kDouble) +
            at::bmm(a.to(torch::kDouble), b.to(torch::kDouble));
        EXPECT_LT(MaxDifference(c, expected), 1e-4);
      }
    }
  }
}

TEST(BatchedProductTest, WritesIntoAStridedOutputAndLeavesTheRestAlone) {
  torch::manual_seed(4);
  // The attention's output: heads [n, rows, D] of a [rows, n * D] matrix.
  torch::Tensor merged = torch::full({64, 4 * 16}, 7.0F);
  const torch::Tensor heads = merged.view({64, 4, 16}).transpose(0, 1).narrow(0, 1, 2);
  const torch::Tensor a = torch::randn({2, 64, 30}), b = torch::randn({2, 30, 16});
  BatchedProduct(heads, a, b, /*accumulate=*/false);
  EXPECT_LT(MaxDifference(heads, at::bmm(a, b)), 1e-4);
  EXPECT_TRUE(merged.narrow(1, 0, 16).eq(7.0F).all().item<bool>());
  EXPECT_TRUE(merged.narrow(1, 48, 16).eq(7.0F).all().item<bool>());
}

TEST(BatchedProductTest, EmptyInnerDimensionGivesZerosOrLeavesTheSum) {
  const torch::Tensor a = torch::empty({2, 3, 0}), b = torch::empty({2, 0, 4});
  torch::Tensor c = torch::ones({2, 3, 4});
  BatchedProduct(c, a, b, /*accumulate=*/true);
  EXPECT_TRUE(c.eq(1).all().item<bool>());
  BatchedProduct(c, a, b, /*accumulate=*/false);
  EXPECT_TRUE(c.eq(0).all().item<bool>());
}

TEST(BatchedProductTest, OtherDtypesAndLayoutsAreLeftToBmm) {
  torch::manual_seed(5);
  const torch::Tensor a = torch::randn({3, 8, 4}).to(torch::kBFloat16);
  const torch::Tensor b = torch::randn({3, 4, 6}).to(torch::kBFloat16);
  torch::Tensor sum = torch::ones({3, 8, 6});  // a float accumulator for bfloat16 products
  EXPECT_FALSE(BatchedProductIsDirect(sum, a, b));
  BatchedProduct(sum, a, b, /*accumulate=*/true);
  EXPECT_LT(MaxDifference(sum, 1 + at::bmm(a, b).to(torch::kFloat)), 1e-6);
  // Neither of the last two strides 1: no BLAS layout.
  const torch::Tensor gapped = torch::randn({3, 16, 8}).slice(1, 0, 16, 2).slice(2, 0, 8, 2);
  const torch::Tensor f = torch::randn({3, 4, 6});
  EXPECT_FALSE(BatchedProductIsDirect(torch::empty({3, 8, 6}), gapped, f));
  torch::Tensor c = torch::empty({3, 8, 6});
  BatchedProduct(c, gapped, f, /*accumulate=*/false);
  EXPECT_LT(MaxDifference(c, at::bmm(gapped, f)), 1e-4);
}

TEST(BatchedProductTest, RefusesShapesThatDoNotMultiply) {
  EXPECT_THROW(BatchedProduct(torch::empty({2, 3, 4}), torch::empty({2, 3, 5}),
                              torch::empty({2, 6, 4}), false),
               c10::Error);
}

}  // namespace
}  // namespace trainerd
