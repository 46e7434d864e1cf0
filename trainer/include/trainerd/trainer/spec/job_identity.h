// The job's identity: a hash of what defines its training semantics, which a training
// checkpoint records and a resume must match. Torch-free.
#pragma once

#include <string>

#include "trainerd/trainer/spec/job_spec.h"

namespace trainerd {

// SHA-256 over the model (its kind, the kind's options less its NonIdentityKeys, block_size,
// inputs, loss, and the hash of the file it was loaded from), the initial weights' hash, the
// data (its fingerprint, format and options less the format's NonIdentityKeys), the
// optimizer, the schedule, the effective batch, the updates, the clip and the seed. Nothing a
// kind or format adds can be left out by mistake: every option is in unless it declares it
// out. The plan (microbatch and the other memory trades) and the runtime are not: a run may
// resume under another plan. tests/trainer/job_identity_test.cc walks every key the parser
// reads and fails on one not classified there, so a new key cannot be left out silently.
std::string JobIdentity(const JobSpec& spec, const std::string& data_fingerprint);

}  // namespace trainerd
