// Writes the checkpoint harness's seeds with the trainer's own writer: the model of
// training_checkpoint_model.h after one AdamW step, saved by SaveTrainingCheckpoint as a
// fp32 run and as an fp16 run (with loss-scaler state). Usage:
//   build-fuzz/fuzz/training_checkpoint_seed tests/fuzz/corpus/training_checkpoint
#include <cstdio>
#include <string>

#include "trainerd/trainer/loop/training_checkpoint.h"
#include "training_checkpoint_model.h"

int main(int argc, char** argv) {
  using namespace trainerd;
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s OUTPUT_DIR\n", argv[0]);
    return 2;
  }
  const std::string dir = argv[1];
  fuzz::CheckpointModel m = fuzz::BuildCheckpointModel(/*step=*/true);
  const torch::Device cpu(torch::kCPU);
  CheckpointState fp32{3, fuzz::kCheckpointIdentity, std::nullopt, 0, "cpu"};
  CheckpointState fp16{3, fuzz::kCheckpointIdentity, 65536.0, 2, "cpu"};
  for (const auto& [name, state] : {std::pair{"fp32.pt", fp32}, std::pair{"fp16.pt", fp16}}) {
    const Status saved =
        SaveTrainingCheckpoint(dir + "/" + name, *m.model, *m.optimizer, state, cpu);
    if (!saved.ok()) {
      std::fprintf(stderr, "%s\n", saved.message().c_str());
      return 1;
    }
  }
  return 0;
}
