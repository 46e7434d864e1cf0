// libFuzzer harness for the training checkpoint loader: any bytes as the checkpoint file,
// loaded into a fresh tiny model and AdamW on the CPU. LoadTrainingCheckpoint must return a
// state or a Status (LibTorch's errors on a damaged archive are expected and must come back
// as Corruption), never throw, crash, leak or hit undefined behaviour. The loader's CRC check
// (trainer/src/zip_check.cc) stops most mutations; those that keep the CRCs reach LibTorch,
// which is not instrumented. Built with GCC (CMakeLists.txt). Seeds:
// corpus/training_checkpoint/, written by training_checkpoint_seed (the trainer's
// SaveTrainingCheckpoint).
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "fuzz_check.h"
#include "trainerd/trainer/loop/training_checkpoint.h"
#include "training_checkpoint_model.h"

namespace {

std::string* checkpoint_dir = nullptr;

void RemoveDir() {
  std::error_code ignored;
  if (checkpoint_dir != nullptr) std::filesystem::remove_all(*checkpoint_dir, ignored);
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int* /*argc*/, char*** /*argv*/) {
  // One intra-op thread: the harness runs one input at a time, and pool threads started
  // lazily would look like leaks of the first input.
  torch::set_num_threads(1);
  std::string pattern = (std::filesystem::temp_directory_path() / "trainerd-fuzz-XXXXXX").string();
  trainerd::fuzz::Expect(::mkdtemp(pattern.data()) != nullptr, "mkdtemp");
  checkpoint_dir = new std::string(pattern);
  std::atexit(RemoveDir);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace trainerd;
  const std::string path = *checkpoint_dir + "/checkpoint.pt";
  {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
    fuzz::Expect(static_cast<bool>(out), "cannot write " + path);
  }
  fuzz::CheckpointModel m = fuzz::BuildCheckpointModel(/*step=*/false);
  const Result<CheckpointState> state = LoadTrainingCheckpoint(
      path, *m.model, *m.optimizer, fuzz::kCheckpointIdentity, torch::Device(torch::kCPU));
  if (!state.ok()) {
    fuzz::Expect(state.status().message().starts_with(path),
                 "error does not name the file: " + state.status().message());
  }
  return 0;
}
