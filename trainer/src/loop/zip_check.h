// Integrity check of a LibTorch archive before LibTorch reads it. LibTorch's serialization
// format is a zip archive of stored records (the TorchScript code deflated), each with the
// CRC-32 of its data, but LibTorch reads it without checking them, and a damaged archive can
// crash it: LibTorch 1.13 dies with SIGSEGV in the TorchScript parser on a few changed bytes
// (found by tests/fuzz/training_checkpoint_fuzzer). Private to the trainer library.
#pragma once

#include <string>

#include "trainerd/common/status.h"

namespace trainerd {

// Ok when the file at `path` is a zip archive (zip64 included) whose every entry, stored or
// deflated, holds data matching the CRC-32 the central directory records; otherwise Corruption
// naming the path and what is wrong (or that it cannot be read). Reads the whole file.
Status VerifyZipChecksums(const std::string& path);

}  // namespace trainerd
