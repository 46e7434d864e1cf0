// Names of the user scopes the trainer marks (RECORD_USER_SCOPE) around work the op profiler
// (profile/) groups by scope rather than by op name: every op run inside one belongs to its
// group, whatever the op. Here, below the models and the loop that mark them, so that marking
// a scope needs no profiler.
#pragma once

#include <ATen/record_function.h>  // RECORD_USER_SCOPE

namespace trainerd {

inline constexpr const char* kOptimizerScope = "trainerd::optimizer_step";
inline constexpr const char* kDropoutScope = "trainerd::dropout";
inline constexpr const char* kAttentionScope = "trainerd::attention";  // softmax, mask, dropout

}  // namespace trainerd
