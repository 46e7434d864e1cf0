// trainer-run's exit codes: a contract with the daemon's supervisor and with scripts.
// Documented in `trainer-run --help` and docs/trainer-run.md.
#pragma once

namespace trainerd::exit_code {

inline constexpr int kOk = 0;             // the job finished; model artifact written
inline constexpr int kInternal = 1;       // unexpected failure (bug, LibTorch error, IO error)
inline constexpr int kUsage = 2;          // bad command line or bad config
inline constexpr int kBadData = 3;        // data missing, empty, unreadable or too short
inline constexpr int kOutOfMemory = 4;    // the memory budget was exceeded, or no plan fits it
inline constexpr int kBadCheckpoint = 5;  // --resume: checkpoint missing, corrupt or of another job
inline constexpr int kNonFiniteLoss = 6;  // training diverged (NaN or inf loss)
inline constexpr int kParityFailed = 7;   // --parity: plan differs from the reference
inline constexpr int kLeak = 8;           // live memory kept growing across updates
inline constexpr int kInterrupted = 75;   // SIGTERM/SIGINT: checkpoint written, resume later

}  // namespace trainerd::exit_code
