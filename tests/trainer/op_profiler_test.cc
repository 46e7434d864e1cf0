// The op profiler on ops whose work is known in closed form, and trainer-run's --profile
// summary of a real plan: groups, the trainer's scopes, the roofline and the trace.
#include "profile/op_profiler.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <fstream>

#include "../support/temp_dir.h"
#include "../support/tiny_job_spec.h"
#include "profile/roofline.h"
#include "trainerd/trainer/data/dataset.h"
#include "trainerd/trainer/profile/update_profile.h"

namespace trainerd {
namespace {

const OpStats* Find(const std::vector<OpStats>& ops, const std::string& name) {
  for (const OpStats& op : ops) {
    if (op.name == name) return &op;
  }
  return nullptr;
}

// [64, 128] x [128, 32] fp32: 2 x 64 x 128 x 32 FLOPs; 4 x (64x128 + 128x32 + 64x32) bytes in
// and out; intensity 524288 / 57344.
TEST(OpProfilerTest, AMatrixProductOfKnownShapeIsCountedInClosedForm) {
  const torch::Tensor a = torch::rand({64, 128});
  const torch::Tensor b = torch::rand({128, 32});
  OpProfiler profiler;
  const torch::Tensor c = torch::mm(a, b);
  profiler.Stop();
  const std::vector<OpStats> ops = profiler.Ops();
  const OpStats* mm = Find(ops, "aten::mm");
  ASSERT_NE(mm, nullptr);
  EXPECT_EQ(mm->calls, 1);
  EXPECT_EQ(mm->group, OpGroup::kMatrixProducts);
  EXPECT_DOUBLE_EQ(mm->flops, 524288.0);
  EXPECT_DOUBLE_EQ(mm->bytes, 57344.0);
  EXPECT_GT(mm->self_seconds, 0);
  const RooflinePoint p = PlaceOnRoofline({1e11, 1e10}, mm->flops, mm->bytes, mm->self_seconds);
  EXPECT_NEAR(p.intensity, 9.142857142857142, 1e-12);
}

TEST(OpProfilerTest, WorkIsCountedOnceAtTheOpThatDoesItAndScopesGroupTheirOps) {
  const torch::Tensor x = torch::rand({8, 16});
  const torch::Tensor w = torch::rand({4, 16});
  const torch::Tensor bias = torch::rand({4});
  torch::Tensor y = torch::ones({4});
  OpProfiler profiler;
  const torch::Tensor out = torch::linear(x, w, bias);  // calls addmm
  {
    RECORD_USER_SCOPE(kOptimizerScope);
    y.add_(1);
  }
  profiler.Stop();
  const std::vector<OpStats> ops = profiler.Ops();
  const OpStats* linear = Find(ops, "aten::linear");
  const OpStats* addmm = Find(ops, "aten::addmm");
  ASSERT_NE(linear, nullptr);
  ASSERT_NE(addmm, nullptr);
  // FLOPs at the product linear called, bytes at linear: x, w, bias in, [8, 4] out.
  EXPECT_EQ(linear->flops, 0);
  EXPECT_DOUBLE_EQ(addmm->flops, 2.0 * 8 * 16 * 4);
  EXPECT_DOUBLE_EQ(linear->bytes, 4.0 * (8 * 16 + 4 * 16 + 4 + 8 * 4));
  EXPECT_EQ(addmm->bytes, 0);
  const OpStats* add = Find(ops, "aten::add_");
  ASSERT_NE(add, nullptr);
  EXPECT_EQ(add->group, OpGroup::kOptimizer);
  const nlohmann::json trace = profiler.ChromeTrace();
  ASSERT_GE(trace["traceEvents"].size(), 4u);  // linear, addmm, the scope, add_ at least
  for (const nlohmann::json& e : trace["traceEvents"]) EXPECT_EQ(e["ph"], "X");
}

TEST(OpProfilerTest, OpsAreGroupedByName) {
  EXPECT_EQ(GroupOf("aten::mm", ""), OpGroup::kMatrixProducts);
  EXPECT_EQ(GroupOf("MmBackward0", ""), OpGroup::kMatrixProducts);
  EXPECT_EQ(GroupOf("aten::mm_other", ""), OpGroup::kOther);
  EXPECT_EQ(GroupOf("aten::_softmax", ""), OpGroup::kAttention);
  EXPECT_EQ(GroupOf("aten::_log_softmax_backward_data", ""), OpGroup::kOther);  // the loss
  EXPECT_EQ(GroupOf("aten::masked_fill", ""), OpGroup::kAttention);
  EXPECT_EQ(GroupOf("aten::native_layer_norm_backward", ""), OpGroup::kNormalisation);
  EXPECT_EQ(GroupOf("aten::bernoulli_", ""), OpGroup::kDropout);
  EXPECT_EQ(GroupOf("aten::mul", kDropoutScope), OpGroup::kDropout);
  EXPECT_EQ(GroupOf("aten::mm", kOptimizerScope), OpGroup::kOptimizer);
  EXPECT_EQ(GroupOf("aten::gelu", ""), OpGroup::kOther);
}

TEST(OpProfilerTest, AProfileOfThePlanPlacesItsGroupsOnTheRooflineAndWritesATrace) {
  JobSpec spec = testing::TinyGptJob();
  spec.plan.microbatch = 4;
  spec.plan.accumulation_steps = 2;
  spec.model.options["dropout"] = 0.1;
  Result<std::unique_ptr<Dataset>> corpus = LoadDataset(spec.data, spec.model.block_size, "");
  ASSERT_TRUE(corpus.ok()) << corpus.status().message();
  testing::TempDir dir;
  ProfileOptions options;
  options.updates = 2;
  options.trace_path = dir.File("trace.json");
  Result<ProfileReport> profile = ProfileUpdates(spec, **corpus, options);
  ASSERT_TRUE(profile.ok()) << profile.status().message();
  const nlohmann::json p = ToJson(*profile);
  EXPECT_GT(p["update_seconds"].get<double>(), 0);
  EXPECT_GT(p["peak_flops"].get<double>(), 0);
  EXPECT_GT(p["memory_bandwidth_bytes_per_second"].get<double>(), 0);
  ASSERT_EQ(p["groups"].size(), kOpGroupNames.entries.size());
  double shares = 0;
  for (const nlohmann::json& g : p["groups"]) {
    shares += g["share"].get<double>();
    // Every group of a GPT with dropout and AdamW is there, scopes included.
    EXPECT_GT(g["calls"].get<double>(), 0) << g["group"];
    if (g["group"] == "matrix products") {
      EXPECT_GT(g["flops"].get<double>(), 0);
      EXPECT_GT(g["intensity"].get<double>(), 0);
      EXPECT_GT(g["fraction_of_bound"].get<double>(), 0);
    }
  }
  EXPECT_LE(shares, 1.0 + 1e-9);  // self times within the update's wall time
  std::ifstream in(options.trace_path);
  const nlohmann::json trace = nlohmann::json::parse(in, nullptr, false);
  ASSERT_TRUE(trace.is_object());
  EXPECT_GT(trace["traceEvents"].size(), 100u);

  spec.runtime.device = "cuda";
  EXPECT_EQ(ProfileUpdates(spec, **corpus, options).status().code(),
            Status::Code::kInvalidArgument);
}

}  // namespace
}  // namespace trainerd
