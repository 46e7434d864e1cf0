// AdamW's weight decay (device/weight_decay.h) in every form of the model state: an update whose
// gradients are all zero moves nothing but the decay, which shrinks each matrix by
// lr x weight_decay and leaves each bias and LayerNorm weight as it was. Which parameters the
// transformers Trainer decays, against its own code: HfWeightDecayTest.
#include "trainerd/trainer/device/weight_decay.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <string>
#include <vector>

#include "../support/tiny_job_spec.h"
#include "trainerd/trainer/loop/model_state.h"
#include "trainerd/trainer/models/build_model.h"

namespace trainerd {
namespace {

struct Form {
  std::string name;
  StatePlacement placement;
  bool step_in_backward;
};

TEST(WeightDecayTest, AZeroGradientUpdateShrinksTheMatricesAndNoBiasOrNormInEveryForm) {
  for (const Form& form : {Form{"on the device", StatePlacement::kDevice, false},
                           Form{"on the host", StatePlacement::kHost, false},
                           Form{"stepped in the backward", StatePlacement::kDevice, true}}) {
    SCOPED_TRACE(form.name);
    JobSpec spec = testing::TinyGptJob();
    spec.optimizer.weight_decay = 0.1;
    spec.plan.optimizer_state = form.placement;
    spec.plan.step_in_backward = form.step_in_backward;
    spec.memory.simulated_device = true;  // the host apart from the device, for its form
    torch::manual_seed(1);
    std::shared_ptr<TrainableModel> model = BuildModel(spec.model, 0, "tiny");
    std::unique_ptr<ModelState> state = MakeModelState(spec, *model, torch::kCPU, nullptr);
    std::vector<torch::Tensor> stepped, before;
    for (auto& group : state->optimizer().param_groups()) {
      for (torch::Tensor& p : group.params()) {
        p.mutable_grad() = torch::zeros_like(p);
        stepped.push_back(p);
        before.push_back(p.detach().clone());
      }
    }
    state->optimizer().step();
    const double shrink = 1 - spec.optimizer.lr * spec.optimizer.weight_decay;
    int matrices = 0, others = 0;
    for (std::size_t i = 0; i < stepped.size(); ++i) {
      if (stepped[i].dim() >= 2) {
        ++matrices;
        EXPECT_TRUE(torch::allclose(stepped[i], before[i] * shrink, 1e-6, 0)) << "tensor " << i;
      } else {
        ++others;
        EXPECT_TRUE(torch::equal(stepped[i], before[i])) << "tensor " << i;
      }
    }
    EXPECT_GT(matrices, 0);
    EXPECT_GT(others, 0) << "the GPT has biases and LayerNorm weights";
  }
}

TEST(WeightDecayTest, TheGroupsAreTheDecayedThenTheOthersBothAlwaysThere) {
  const auto options = torch::optim::AdamWOptions(1e-3).weight_decay(0.1);
  const torch::Tensor matrix = torch::zeros({2, 3}), bias = torch::zeros({3}),
                      norm = torch::ones({3});
  std::vector<torch::optim::OptimizerParamGroup> groups =
      WeightDecayGroups({bias, matrix, norm}, options);
  ASSERT_EQ(groups.size(), 2u);
  ASSERT_EQ(groups[0].params().size(), 1u);
  EXPECT_TRUE(groups[0].params()[0].is_same(matrix));
  ASSERT_EQ(groups[1].params().size(), 2u);
  EXPECT_TRUE(groups[1].params()[0].is_same(bias));
  EXPECT_TRUE(groups[1].params()[1].is_same(norm));
  auto decay_of = [&](std::size_t i) {
    return static_cast<torch::optim::AdamWOptions&>(groups[i].options()).weight_decay();
  };
  EXPECT_EQ(decay_of(0), 0.1);
  EXPECT_EQ(decay_of(1), 0.0);
  groups = WeightDecayGroups({bias}, options);
  ASSERT_EQ(groups.size(), 2u);
  EXPECT_TRUE(groups[0].params().empty());
}

}  // namespace
}  // namespace trainerd
