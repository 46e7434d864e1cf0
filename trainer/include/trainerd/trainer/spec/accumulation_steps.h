// How many microbatches cover an update: PlanSpec::accumulation_steps.
#pragma once

namespace trainerd {

// The microbatches of `microbatch` samples that cover `effective_batch`, the last one short
// where `microbatch` does not divide it.
inline int AccumulationSteps(int effective_batch, int microbatch) {
  return (effective_batch + microbatch - 1) / microbatch;
}

}  // namespace trainerd
