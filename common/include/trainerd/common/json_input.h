// JSON from outside the process (a control request, the worker's stream, an outcome line, a
// model folder's config.json and shard index, a cache file) parsed with its nesting bounded.
// nlohmann's parser is iterative, but copying a value, dump() and comparisons recurse once per
// level: ~100 KB of "[[[[..." parses fine and then overflows the stack of whoever touches it.
// Thread safety: pure functions.
#pragma once

#include <nlohmann/json.hpp>
#include <string_view>

namespace trainerd {

// Arrays and objects nested deeper than this are refused: no input trainerd reads nests
// more than a handful of levels.
inline constexpr int kMaxJsonDepth = 64;

// `text` parsed as JSON; a discarded value (is_discarded()) when it is not JSON or nests
// arrays and objects deeper than `max_depth`. Never throws.
nlohmann::json ParseBoundedJson(std::string_view text, int max_depth = kMaxJsonDepth);

}  // namespace trainerd
