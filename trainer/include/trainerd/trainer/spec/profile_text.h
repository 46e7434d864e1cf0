// The op profile (update_profile.h's JSON) as a table for a person: the roofline's two
// measured roofs, each op group's self time, share of the update, calls, intensity, achieved
// FLOP/s and fraction of its roofline bound, then the top ops. trainer-run --profile prints
// it, and so does trainerctl profile RUN from the stored summary. Torch-free.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace trainerd {

std::string ProfileText(const nlohmann::json& profile);

}  // namespace trainerd
