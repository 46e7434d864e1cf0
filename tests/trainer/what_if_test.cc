#include "trainerd/trainer/plan/what_if.h"

#include <gtest/gtest.h>

#include "trainerd/trainer/spec/units.h"

namespace trainerd {
namespace {

// The example: 3.2 GB static, 0.34 GB per sample, a 24 GB device with 10% reserve.
WhatIfInput Example(int microbatch) {
  return {*ParseBytes("3.2GB"), *ParseBytes("0.34GB"), *ParseBytes("24GB"), 0.10, microbatch, 10};
}

TEST(WhatIfTest, LargestMicrobatchOfTheWorkedExampleIs54) {
  Result<WhatIfResult> r = ComputeWhatIf(Example(0));
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->usable_bytes, 21'600'000'000LL);
  EXPECT_EQ(r->max_microbatch, 54);
  EXPECT_TRUE(r->blocks.empty());
}

TEST(WhatIfTest, ActivationsResidentAfterEachBlockForMicrobatch32) {
  Result<WhatIfResult> r = ComputeWhatIf(Example(32));
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->blocks.size(), 10u);
  for (int b = 1; b <= 10; ++b) {
    EXPECT_EQ(r->blocks[b - 1].activation_bytes, 1'088'000'000LL) << b;
    EXPECT_EQ(r->blocks[b - 1].cumulative_bytes, 1'088'000'000LL * b) << b;
  }
  EXPECT_EQ(r->blocks.back().cumulative_bytes, 10'880'000'000LL);
  EXPECT_EQ(r->total_bytes, 14'080'000'000LL);
  EXPECT_TRUE(r->fits);
  const nlohmann::json json = r->ToJson();
  EXPECT_EQ(json["max_microbatch"], 54);
  EXPECT_EQ(json["blocks"][1]["cumulative_bytes"], 2'176'000'000LL);
  // Printed to two decimals: 1.09, 2.18, 3.26, 4.35, 5.44 ... 10.88 GB.
  const std::string text = r->ToText(Example(32));
  for (const char* figure : {"1.09 GB", "2.18 GB", "3.26 GB", "4.35 GB", "5.44 GB", "10.88 GB"}) {
    EXPECT_NE(text.find(figure), std::string::npos) << figure;
  }
}

TEST(WhatIfTest, AMicrobatchAboveTheLimitDoesNotFit) {
  Result<WhatIfResult> r = ComputeWhatIf(Example(55));
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r->fits);
  Result<WhatIfResult> edge = ComputeWhatIf(Example(54));
  EXPECT_TRUE(edge->fits);
}

TEST(WhatIfTest, BadInputIsRejected) {
  WhatIfInput bad = Example(32);
  bad.reserve_fraction = 1.0;
  EXPECT_FALSE(ComputeWhatIf(bad).ok());
  bad = Example(32);
  bad.activation_bytes_per_sample = 0;
  EXPECT_FALSE(ComputeWhatIf(bad).ok());
}

}  // namespace
}  // namespace trainerd
