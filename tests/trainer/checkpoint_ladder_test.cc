#include "plan/checkpoint_ladder.h"

#include <gtest/gtest.h>

namespace trainerd {
namespace {

TEST(CheckpointLadderTest, IdenticalBlocksGoEarliestFirstWhateverTheirTimingNoise) {
  // Four identical blocks whose measured forwards differ by up to 8%: the last one looks
  // the most efficient, yet checkpointing it first would save nothing at the peak.
  const std::vector<BlockCost> blocks = {
      {0, 1e6, 1.05e-3}, {1, 1e6, 1.02e-3}, {2, 1e6, 1.08e-3}, {3, 1e6, 1.00e-3}};
  EXPECT_EQ(CheckpointLadder(blocks), (std::vector<int>{0, 1, 2, 3}));
}

TEST(CheckpointLadderTest, AClearlyMoreEfficientBlockGoesFirst) {
  const std::vector<BlockCost> blocks = {
      {0, 1e6, 1e-3}, {1, 1e6, 1e-3}, {2, 3e6, 1e-3}, {3, 1e6, 2e-3}};
  // Block 2 saves 3x per second; 0 and 1 are equal; 3 costs twice as much time.
  EXPECT_EQ(CheckpointLadder(blocks), (std::vector<int>{2, 0, 1, 3}));
}

TEST(CheckpointLadderTest, AGroupIsMeasuredFromItsMostEfficientBlock) {
  // 1.0, 0.95, 0.88 of the best: the first two are equal, the third starts a group of its
  // own (it is more than 10% below the best), so the chain does not drift downwards.
  const std::vector<BlockCost> blocks = {{0, 0.88e6, 1e-3}, {1, 0.95e6, 1e-3}, {2, 1e6, 1e-3}};
  EXPECT_EQ(CheckpointLadder(blocks), (std::vector<int>{1, 2, 0}));
}

TEST(CheckpointLadderTest, ABlockThatSavesNothingGoesLast) {
  const std::vector<BlockCost> blocks = {{0, 0, 1e-3}, {1, 1e6, 1e-3}};
  EXPECT_EQ(CheckpointLadder(blocks), (std::vector<int>{1, 0}));
  EXPECT_TRUE(CheckpointLadder({}).empty());
  // Checkpointing a tiny block can cost bytes: it ranks last, and the ranking ends.
  EXPECT_EQ(CheckpointLadder({{0, -2e3, 1e-3}, {1, -1e3, 1e-3}, {2, 5e2, 1e-3}}),
            (std::vector<int>{2, 1, 0}));
}

}  // namespace
}  // namespace trainerd
