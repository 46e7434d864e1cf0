#include "trainerd/common/json_input.h"

namespace trainerd {

nlohmann::json ParseBoundedJson(std::string_view text, int max_depth) {
  bool too_deep = false;
  // The callback sees every array and object as it opens, at its depth (the top level is 0);
  // discarding the first one too deep keeps nothing below it, and the flag refuses the text.
  const nlohmann::json::parser_callback_t bound =
      [&too_deep, max_depth](int depth, nlohmann::json::parse_event_t event, nlohmann::json&) {
        const bool opens = event == nlohmann::json::parse_event_t::object_start ||
                           event == nlohmann::json::parse_event_t::array_start;
        if (opens && depth >= max_depth) too_deep = true;
        return !too_deep;
      };
  nlohmann::json json = nlohmann::json::parse(text, bound, /*allow_exceptions=*/false);
  if (too_deep) return nlohmann::json(nlohmann::json::value_t::discarded);
  return json;
}

}  // namespace trainerd
