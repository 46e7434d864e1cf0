// The test a plan lever's parity owes: the check passes the plan, and rejects the lever's own
// fault with a margin (the fault's difference at least `margin` times its tolerance somewhere).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>

#include "trainerd/trainer/data/dataset.h"
#include "trainerd/trainer/plan/parity.h"

namespace trainerd::testing {

inline void ExpectParityPassesAndRejects(const JobSpec& spec, const Dataset& corpus,
                                         TrainingFault fault, double margin = 3.0) {
  const Result<ParityReport> pass = CheckParity(spec, corpus, 2);
  ASSERT_TRUE(pass.ok()) << pass.status().message();
  EXPECT_TRUE(pass->pass) << ToJson(*pass).dump();
  const Result<ParityReport> faulty = CheckParity(spec, corpus, 2, fault);
  ASSERT_TRUE(faulty.ok()) << faulty.status().message();
  EXPECT_FALSE(faulty->pass) << ToJson(*faulty).dump();
  double worst = 0;  // of the tolerance the fault's difference takes, at its worst
  for (const ParityComparison& c : faulty->comparisons) worst = std::max(worst, c.worst_ratio);
  EXPECT_GE(worst, margin) << "rejected with a margin: " << ToJson(*faulty).dump();
}

}  // namespace trainerd::testing
