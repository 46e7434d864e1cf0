#include "trainerd/trainer/semantics/activation_checkpoint.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <optional>
#include <thread>

#include "../support/cuda_test.h"
#include "../support/grad_compare.h"
#include "models/gpt/gpt.h"
#include "trainerd/trainer/device/torch_compat.h"
#include "trainerd/trainer/semantics/sample_dropout.h"

namespace trainerd {
namespace {

using testing::MaxAbsDifference;
using testing::MaxGradDifference;
using testing::MaxParameterDifference;

// The worked example: Linear(32,64)-GELU-Linear(64,32) checkpointed plus a
// Linear(32,1) head, four microbatches of 8 with loss/4, clip 1.0 once, one AdamW step,
// against one uncheckpointed batch of 32.
TEST(ActivationCheckpointTest, WorkedExampleMatchesOneLargeBatch) {
  torch::manual_seed(0);
  torch::nn::Sequential block(torch::nn::Linear(32, 64), torch::nn::GELU(),
                              torch::nn::Linear(64, 32));
  torch::nn::Linear head(32, 1);
  auto block_ref = std::dynamic_pointer_cast<torch::nn::SequentialImpl>(block->clone());
  auto head_ref = std::dynamic_pointer_cast<torch::nn::LinearImpl>(head->clone());
  const auto block_initial = block->clone();
  const torch::Tensor x = torch::randn({32, 32});

  auto params = [](auto& a, auto& b) {
    auto p = a->parameters();
    auto q = b->parameters();
    p.insert(p.end(), q.begin(), q.end());
    return p;
  };
  torch::optim::AdamW optimizer(params(block, head), torch::optim::AdamWOptions(1e-3));
  torch::optim::AdamW optimizer_ref(params(block_ref, head_ref), torch::optim::AdamWOptions(1e-3));

  int block_calls = 0;
  const BlockFunction run_block = [&](const torch::Tensor& in) {
    ++block_calls;
    return block->forward(in);
  };
  optimizer.zero_grad();
  for (int k = 0; k < 4; ++k) {
    torch::Tensor hidden =
        CheckpointedForward(run_block, x.narrow(0, 8 * k, 8), block->parameters());
    ASSERT_NE(hidden.grad_fn(), nullptr);
    EXPECT_NE(hidden.grad_fn()->name().find("CheckpointFunction"), std::string::npos);
    (head->forward(hidden).square().mean() / 4).backward();
  }
  EXPECT_EQ(block_calls, 8);  // each microbatch: once in forward, once recomputed in backward
  torch::nn::utils::clip_grad_norm_(params(block, head), 1.0);

  optimizer_ref.zero_grad();
  head_ref->forward(block_ref->forward(x)).square().mean().backward();
  torch::nn::utils::clip_grad_norm_(params(block_ref, head_ref), 1.0);

  // The semantics are in the clipped gradients: equal up to float summation order.
  EXPECT_LE(MaxGradDifference(*block, *block_ref), 1e-7);
  EXPECT_LE(MaxGradDifference(*head, *head_ref), 1e-7);
  optimizer.step();
  optimizer_ref.step();
  // AdamW's first step is lr * g / (|g| + eps / sqrt(1 - beta2)) per element: for gradients
  // near eps it turns their float rounding into a parameter difference of a few lr * 1e-3
  // (1.3e-6 seen on an AMD EPYC at lr 1e-3), so parameters get a looser bound.
  EXPECT_LE(MaxParameterDifference(*block, *block_ref), 5e-6);
  EXPECT_LE(MaxParameterDifference(*head, *head_ref), 5e-6);
  // The step moved the parameters, so the comparison is not between two untouched copies.
  EXPECT_GT(MaxParameterDifference(*block, *block_initial), 1e-4);
}

GptOptions DropoutGpt() {
  GptOptions o;
  o.n_layer = 3;
  o.n_head = 2;
  o.n_embd = 16;
  o.block_size = 10;
  o.dropout = 0.1;
  return o;
}

// Loss and gradients of one forward/backward with the given checkpointed blocks.
double LossWith(Gpt& model, const std::vector<int>& blocks, const torch::Tensor& tokens) {
  model.set_checkpointed_blocks(blocks);
  model.zero_grad();
  torch::manual_seed(42);  // same dropout masks for every variant
  torch::Tensor logits = model.forward(tokens);
  torch::Tensor loss = torch::nn::functional::cross_entropy(logits.reshape({-1, 256}),
                                                            tokens.roll(-1, 1).reshape({-1}));
  loss.backward();
  return loss.item<double>();
}

TEST(ActivationCheckpointTest, GptWithDropoutMatchesUncheckpointedForAllAndSubsets) {
  torch::manual_seed(3);
  Gpt reference(DropoutGpt());
  const torch::Tensor tokens = torch::randint(0, 256, {4, 10}, torch::kLong);
  const double reference_loss = LossWith(reference, {}, tokens);
  for (const std::vector<int>& blocks :
       {std::vector<int>{0, 1, 2}, std::vector<int>{1}, std::vector<int>{0, 2}}) {
    torch::manual_seed(3);
    Gpt model(DropoutGpt());
    EXPECT_EQ(LossWith(model, blocks, tokens), reference_loss) << blocks.size() << " blocks";
    EXPECT_LE(MaxGradDifference(model, reference), 1e-6) << blocks.size() << " blocks";
  }
}

class CudaActivationCheckpointTest : public testing::CudaTest {};

// As above on the GPU: the recompute must restore the CUDA generator of the block's device,
// not only the CPU one, or its dropout masks differ from the forward's.
TEST_F(CudaActivationCheckpointTest, GptWithDropoutMatchesUncheckpointedOnCuda) {
  torch::manual_seed(3);
  Gpt reference(DropoutGpt());
  reference.to(cuda_);
  const torch::Tensor tokens = torch::randint(0, 256, {4, 10}, torch::kLong).to(cuda_);
  const double reference_loss = LossWith(reference, {}, tokens);
  for (const std::vector<int>& blocks : {std::vector<int>{0, 1, 2}, std::vector<int>{1}}) {
    torch::manual_seed(3);
    Gpt model(DropoutGpt());
    model.to(cuda_);
    EXPECT_EQ(LossWith(model, blocks, tokens), reference_loss) << blocks.size() << " blocks";
    EXPECT_LE(MaxGradDifference(model, reference), 1e-5) << blocks.size() << " blocks";
  }
}

TEST(ActivationCheckpointTest, DropoutMasksWouldDifferWithoutRngRestore) {
  // Control: the same model under two different seeds gives different losses, so equal
  // losses above mean the masks were really reproduced.
  torch::manual_seed(3);
  Gpt model(DropoutGpt());
  const torch::Tensor tokens = torch::randint(0, 256, {4, 10}, torch::kLong);
  const double a = LossWith(model, {}, tokens);
  model.zero_grad();
  torch::manual_seed(43);
  torch::Tensor loss = torch::nn::functional::cross_entropy(
      model.forward(tokens).reshape({-1, 256}), tokens.roll(-1, 1).reshape({-1}));
  EXPECT_NE(loss.item<double>(), a);
}

TEST(ActivationCheckpointTest, ParametersGetGradientsWhenTheInputNeedsNone) {
  GptOptions o = DropoutGpt();
  torch::manual_seed(5);
  GptBlock checkpointed(o, /*site=*/0);
  torch::manual_seed(5);
  GptBlock plain(o, /*site=*/0);
  const torch::Tensor x = torch::randn({2, 10, 16});  // requires_grad = false
  ASSERT_FALSE(x.requires_grad());

  torch::manual_seed(9);
  CheckpointedForward([&](const torch::Tensor& in) { return checkpointed->forward(in); }, x,
                      checkpointed->parameters())
      .square()
      .sum()
      .backward();
  torch::manual_seed(9);
  plain->forward(x).square().sum().backward();

  for (const auto& p : checkpointed->parameters()) ASSERT_TRUE(p.grad().defined());
  EXPECT_LE(MaxGradDifference(*checkpointed, *plain), 1e-6);
}

// With the trainer's sample streams the masks belong to the samples: rows 0-3 as one
// microbatch or as two, checkpointed or not, see the same dropout.
TEST(ActivationCheckpointTest, SampleStreamMasksDoNotDependOnTheSplitOrTheRecompute) {
  torch::manual_seed(3);
  Gpt model(DropoutGpt());
  const torch::Tensor tokens = torch::randint(0, 256, {4, 10}, torch::kLong);
  auto logits_of = [&](const std::vector<int>& blocks, int first, int rows) {
    model.set_checkpointed_blocks(blocks);
    const SampleStreamScope stream(SampleStream{11, first});
    torch::manual_seed(first * 1000 + rows);  // the default generator must not matter
    return model.forward(tokens.narrow(0, first, rows));
  };
  const torch::Tensor whole = logits_of({}, 0, 4).detach();
  const torch::Tensor split =
      torch::cat({logits_of({}, 0, 2), logits_of({}, 2, 2)}, /*dim=*/0).detach();
  // Not bitwise: that would also ask the matrix products to round alike at 4 rows and at 2,
  // which OpenBLAS's AVX-512 kernels do not (seen on an AMD EPYC with avx512_bf16: 1e-7).
  // A mask that differs changes logits by O(1).
  EXPECT_LE(MaxAbsDifference(whole, split), 1e-5);
  // Another seed gives other masks: the equality above is not dropout being off.
  const SampleStreamScope other(SampleStream{12, 0});
  EXPECT_GT(MaxAbsDifference(whole, model.forward(tokens).detach()), 1e-2);
}

TEST(ActivationCheckpointTest, CheckpointedGradientsEqualUncheckpointedUnderSampleStreams) {
  for (const bool bf16 : {false, true}) {
    torch::manual_seed(3);
    Gpt reference(DropoutGpt());
    torch::manual_seed(3);
    Gpt model(DropoutGpt());
    const torch::Tensor tokens = torch::randint(0, 256, {4, 10}, torch::kLong);
    auto backward = [&](Gpt& gpt, const std::vector<int>& blocks) {
      gpt.set_checkpointed_blocks(blocks);
      const SampleStreamScope stream(SampleStream{5, 40});
      std::optional<compat::AutocastScope> autocast;
      if (bf16) autocast.emplace(at::kCPU, compat::AutocastState{true, at::kBFloat16});
      torch::Tensor loss = torch::nn::functional::cross_entropy(
          gpt.forward(tokens).reshape({-1, 256}).to(torch::kFloat),
          tokens.roll(-1, 1).reshape({-1}));
      autocast.reset();
      loss.backward();
      return loss.item<double>();
    };
    EXPECT_EQ(backward(model, {0, 1, 2}), backward(reference, {})) << "bf16 " << bf16;
    // The recompute reproduces the forward bit for bit, in bf16 too.
    EXPECT_LE(MaxGradDifference(model, reference), bf16 ? 1e-6 : 1e-7) << "bf16 " << bf16;
  }
}

// LibTorch runs a CUDA graph's backward on its device's own thread, where the forward's
// thread-local sample stream is not current: the recompute must draw the forward's masks all
// the same. A backward on another thread shows it on the CPU.
TEST(ActivationCheckpointTest, TheRecomputeDrawsTheForwardsMasksWhenTheBackwardRunsElsewhere) {
  torch::manual_seed(3);
  Gpt reference(DropoutGpt());
  torch::manual_seed(3);
  Gpt model(DropoutGpt());
  const torch::Tensor tokens = torch::randint(0, 256, {4, 10}, torch::kLong);
  auto loss_of = [&](Gpt& gpt, const std::vector<int>& blocks) {
    gpt.set_checkpointed_blocks(blocks);
    const SampleStreamScope stream(SampleStream{5, 40});
    return torch::nn::functional::cross_entropy(gpt.forward(tokens).reshape({-1, 256}),
                                                tokens.roll(-1, 1).reshape({-1}));
  };
  loss_of(reference, {}).backward();
  const torch::Tensor loss = loss_of(model, {0, 1, 2});
  std::thread([&loss] { loss.backward(); }).join();  // no sample stream is current there
  EXPECT_LE(MaxGradDifference(model, reference), 1e-7);
}

// A checkpointed BatchNorm block updates its running statistics once per forward, as an
// uncheckpointed one does, although the recompute runs it a second time in training mode.
TEST(ActivationCheckpointTest, RecomputeDoesNotUpdateBatchNormStatisticsTwice) {
  torch::manual_seed(0);
  torch::nn::Sequential checkpointed(torch::nn::Linear(6, 6), torch::nn::BatchNorm1d(6));
  auto plain = std::dynamic_pointer_cast<torch::nn::SequentialImpl>(checkpointed->clone());
  const torch::Tensor x = torch::randn({8, 6});
  CheckpointedForward([&](const torch::Tensor& in) { return checkpointed->forward(in); }, x,
                      checkpointed->parameters(), checkpointed->buffers())
      .square()
      .sum()
      .backward();
  plain->forward(x).square().sum().backward();
  const auto stats = checkpointed->named_buffers();
  for (const auto& item : plain->named_buffers()) {
    EXPECT_TRUE(torch::equal(stats[item.key()], item.value())) << item.key();
  }
  EXPECT_EQ(stats["1.num_batches_tracked"].item<std::int64_t>(), 1);
  EXPECT_LE(MaxGradDifference(*checkpointed, *plain), 1e-6);
}

TEST(ActivationCheckpointTest, RecomputeRunsUnderTheForwardsAutocastState) {
  torch::manual_seed(0);
  torch::nn::Linear layer(8, 8);
  const torch::Tensor x = torch::randn({4, 8}, torch::requires_grad());
  at::ScalarType recomputed_dtype = at::kFloat;
  int calls = 0;
  const BlockFunction run = [&](const torch::Tensor& in) {
    torch::Tensor out = layer->forward(in);
    if (++calls == 2) recomputed_dtype = out.scalar_type();
    return out;
  };
  torch::Tensor out;
  {
    compat::AutocastScope autocast(at::kCPU, {true, at::kBFloat16});
    out = CheckpointedForward(run, x, layer->parameters());
  }
  EXPECT_EQ(out.scalar_type(), at::kBFloat16);
  out.to(torch::kFloat).sum().backward();  // outside autocast, as the training loop does
  EXPECT_EQ(calls, 2);
  EXPECT_EQ(recomputed_dtype, at::kBFloat16);
  EXPECT_FALSE(compat::GetAutocast(at::kCPU).enabled);
}

}  // namespace
}  // namespace trainerd
