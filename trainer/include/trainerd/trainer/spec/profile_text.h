// The op profile (worker_protocol.h's ProfileReport) as a table for a person: the roofline's
// two measured roofs, each op group's self time, share of the update, calls, intensity,
// achieved FLOP/s and fraction of its roofline bound, then the top ops. trainer-run --profile
// prints it, and so does trainerctl profile RUN from the stored summary. Torch-free.
#pragma once

#include <string>

#include "trainerd/trainer/spec/worker_protocol.h"

namespace trainerd {

std::string ProfileText(const ProfileReport& profile);

}  // namespace trainerd
