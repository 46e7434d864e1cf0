#include "plan/checkpoint_ladder.h"

#include <algorithm>
#include <iterator>

namespace trainerd {

std::vector<int> CheckpointLadder(const std::vector<BlockCost>& blocks) {
  constexpr double kEqualWithin = 1.1;
  const auto efficiency = [](const BlockCost& b) {
    return b.saved_bytes / std::max(b.recompute_seconds, 1e-9);
  };
  std::vector<BlockCost> ranked = blocks;
  std::stable_sort(ranked.begin(), ranked.end(), [&](const BlockCost& a, const BlockCost& b) {
    return efficiency(a) > efficiency(b);
  });
  for (auto group = ranked.begin(); group != ranked.end();) {
    // A block that saves nothing (or costs bytes: tiny blocks can) is only equal to its like.
    const double best = efficiency(*group);
    const double least = best > 0 ? best / kEqualWithin : best;
    const auto end = std::find_if(std::next(group), ranked.end(),
                                  [&](const BlockCost& b) { return efficiency(b) < least; });
    std::sort(group, end, [](const BlockCost& a, const BlockCost& b) { return a.index < b.index; });
    group = end;
  }
  std::vector<int> order;
  for (const BlockCost& b : ranked) order.push_back(b.index);
  return order;
}

}  // namespace trainerd
