// Activations in host memory (plan offload_activations): while an ActivationOffloadScope is
// alive on a thread, each tensor that autograd saves there for the backward is copied to host
// memory and the graph keeps only that copy; the backward copies it back to the device when
// the node that saved it runs, and the restored tensor is freed with the node's inputs. A
// block's forward then leaves only its output on the device, as a checkpointed block does,
// without recomputing anything: the device holds, during the backward, one node's restored
// inputs at a time.
//
// - The same values: a copy is a copy, so the update is the one without the lever, bit for
//   bit (the parity check proves it and rejects TrainingFault::kOffloadRestoredStale).
// - What stays: the block's parameters and buffers (and views of them) are saved as they
//   are (they stay on the device anyway), and a tensor saved twice in one scope (by two ops,
//   unchanged in between) is copied once.
// - Host memory: the copies are allocated in a HostMemoryScope (device_memory.h), pinned on
//   CUDA; on the CPU with memory.simulated_device they are outside the device's budget.
// - CUDA: each copy to the host runs on a copy stream after the forward's kernels that made
//   the tensor, beside the forward's next kernels (the caching allocator keeps the device
//   tensor until the copy is done); the copy back waits for it and runs on the backward's
//   stream, from pinned memory, without blocking the host.
// - How: LibTorch asks the default autograd engine for the hooks of every saved tensor
//   (Engine::get_default_saved_variable_hooks, the seam Python's saved-tensor hooks use). The
//   first scope installs, once per process, an engine that answers with the copying hooks
//   inside a scope and with none outside it; 1.13 and 2.x have the same seam.
#pragma once

#include <torch/types.h>

#include <cstdint>
#include <vector>

namespace trainerd {

class ActivationOffloadScope {
 public:
  // `resident` and `buffers`: the tensors that stay where they are when saved (with their
  // views): the block's parameters and buffers. Scopes do not nest. `restored_stale` is
  // TrainingFault::kOffloadRestoredStale (TEST ONLY): a host copy comes from a pool of the freed
  // ones of its shape and dtype without being written, so the backward restores an earlier
  // microbatch's values.
  ActivationOffloadScope(const std::vector<torch::Tensor>& resident,
                         const std::vector<torch::Tensor>& buffers, bool restored_stale = false);
  ~ActivationOffloadScope();
  ActivationOffloadScope(const ActivationOffloadScope&) = delete;
  ActivationOffloadScope& operator=(const ActivationOffloadScope&) = delete;
};

// Bytes the host copies of saved tensors hold now, in this process (what the memory ledger
// shows as the host's activations; on CUDA pinned memory, which the CPU's count never sees).
std::int64_t OffloadedActivationBytes();

}  // namespace trainerd
