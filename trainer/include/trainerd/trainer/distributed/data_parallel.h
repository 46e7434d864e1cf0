// One rank's collectives in a data-parallel job (docs/distributed.md), on LibTorch's c10d:
// rank 0 hosts a TCPStore at MASTER_ADDR:MASTER_PORT for the rendezvous, then every rank
// joins ProcessGroupGloo (CPU jobs) or ProcessGroupNCCL (CUDA jobs, device LOCAL_RANK).
// Every method except the accessors is a collective: all ranks call it, in the same order. A
// rank whose peer died or that waited past the timeout gets a c10::Error from the call (the
// training loop turns it into an error exit), never a hang.
#pragma once

#include <torch/types.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "trainerd/common/status.h"
#include "trainerd/trainer/device/torch_compat.h"
#include "trainerd/trainer/spec/rank_environment.h"

namespace trainerd {

class DataParallelGroup {
 public:
  // Gradients go over the wire in buckets of at most this many bytes (as DDP's default).
  static constexpr std::int64_t kBucketBytes = 25 << 20;

  // Waits up to `timeout_seconds` for the other ranks. Errors: Unavailable-like conditions
  // (the store's port taken, a rank that never came) as IOError naming master address and
  // port; a CUDA job on a LibTorch without CUDA as InvalidArgument.
  static Result<std::unique_ptr<DataParallelGroup>> Join(const RankEnvironment& env,
                                                         const torch::Device& device,
                                                         double timeout_seconds);
  ~DataParallelGroup();
  DataParallelGroup(const DataParallelGroup&) = delete;
  DataParallelGroup& operator=(const DataParallelGroup&) = delete;

  int rank() const { return rank_; }
  int world_size() const { return world_size_; }
  const std::string& backend() const { return backend_; }  // "gloo" or "nccl"

  // The sum over the ranks of each one's `value`.
  double Sum(double value);
  // Whether any rank passed true.
  bool Any(bool value);
  // For each element, whether any rank passed true there (one allreduce).
  std::vector<bool> AnyOf(const std::vector<bool>& values);
  // Replaces every defined gradient of `parameters` by its sum over the ranks: one allreduce
  // per bucket of consecutive gradients (kBucketBytes), each flattened into one tensor. All
  // ranks must hold gradients for the same parameters.
  void SumGradients(const std::vector<torch::Tensor>& parameters);
  // ZeRO stage 2 (state_sharding.h): the gradient of each parameter i with taking_part[i]
  // summed over the ranks into rank owners[i]'s, in buckets of consecutive gradients of one
  // owner; a rank without that gradient adds zeros, and an owner without one gets one. The
  // other ranks' gradients keep what they held.
  void SumGradientsToOwners(const std::vector<torch::Tensor>& parameters,
                            const std::vector<int>& owners, const std::vector<bool>& taking_part);
  // Every tensor set to rank owners[i]'s value, in buckets of consecutive tensors of one owner.
  void BroadcastFromOwners(const std::vector<torch::Tensor>& tensors,
                           const std::vector<int>& owners);

 private:
  DataParallelGroup(int rank, int world_size, torch::Device device, std::string backend,
                    c10::intrusive_ptr<compat::CollectiveBackend> group);
  void AllReduceSum(torch::Tensor& tensor);
  // `collective` on each bucket of `tensors` flattened into one: consecutive tensors of one
  // dtype and one root (roots[i]) of at most kBucketBytes together, an undefined tensor as
  // zeros shaped as likes[i]. The bucket's result is copied back into its defined tensors
  // where `collective` returns true.
  void InBuckets(const std::vector<torch::Tensor>& tensors, const std::vector<torch::Tensor>& likes,
                 const std::vector<int>& roots,
                 const std::function<bool(torch::Tensor& flat, int root)>& collective);

  int rank_;
  int world_size_;
  torch::Device device_;
  std::string backend_;
  c10::intrusive_ptr<compat::CollectiveBackend> group_;
};

}  // namespace trainerd
