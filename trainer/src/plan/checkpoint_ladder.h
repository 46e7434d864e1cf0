// The order in which the planner checkpoints blocks: plan k of the ladder checkpoints its
// first k blocks. Pure arithmetic on the ledger's per-block figures: no torch.
#pragma once

#include <vector>

namespace trainerd {

struct BlockCost {
  int index = 0;                 // the block's position in the model, 0 first
  double saved_bytes = 0;        // activation bytes checkpointing it saves
  double recompute_seconds = 0;  // its forward, which the backward then runs again
};

// Blocks by bytes saved per second of recompute, most first. Blocks within 10% of the most
// efficient one of their group count as equal (identical blocks differ by timing noise alone)
// and go earlier block first: a checkpointed block is recomputed when the backward reaches
// it, and an early block's recompute comes after the later blocks' activations are freed, so
// it lowers the peak; checkpointing only the last block saves nothing at the start of the
// backward.
std::vector<int> CheckpointLadder(const std::vector<BlockCost>& blocks);

}  // namespace trainerd
