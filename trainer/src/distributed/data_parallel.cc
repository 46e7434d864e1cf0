#include "trainerd/trainer/distributed/data_parallel.h"

#include <torch/torch.h>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <thread>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#ifdef TRAINERD_WITH_CUDA
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#endif

namespace trainerd {
namespace {

bool IsLoopback(const std::string& address) {
  return address == "localhost" || address.rfind("127.", 0) == 0 || address == "::1";
}

// The network device Gloo talks through: GLOO_SOCKET_IFNAME's interface when set (as
// PyTorch), loopback for a job whose master is on loopback, else the address this host's
// name resolves to.
std::shared_ptr<::gloo::transport::Device> GlooDevice(const RankEnvironment& env) {
  if (const char* interface = std::getenv("GLOO_SOCKET_IFNAME"); interface && *interface) {
    return c10d::ProcessGroupGloo::createDeviceForInterface(interface);
  }
  if (IsLoopback(env.master_addr)) {
    return c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1");
  }
  return c10d::ProcessGroupGloo::createDefaultDevice();
}

c10::intrusive_ptr<compat::CollectiveBackend> GlooGroup(
    const c10::intrusive_ptr<c10d::Store>& store, const RankEnvironment& env,
    std::chrono::milliseconds timeout) {
  auto options = c10d::ProcessGroupGloo::Options::create();
  options->devices.push_back(GlooDevice(env));
  options->timeout = timeout;
  options->threads = 1;  // one bucket at a time: the training threads keep the cores
  return c10::make_intrusive<c10d::ProcessGroupGloo>(store, env.rank, env.world_size, options);
}

#ifdef TRAINERD_WITH_CUDA
c10::intrusive_ptr<compat::CollectiveBackend> NcclGroup(
    const c10::intrusive_ptr<c10d::Store>& store, const RankEnvironment& env,
    std::chrono::milliseconds timeout) {
  auto options = c10d::ProcessGroupNCCL::Options::create();
  options->timeout = timeout;
  return c10::make_intrusive<c10d::ProcessGroupNCCL>(store, env.rank, env.world_size, options);
}
#endif

// Ends the process (exit 1) unless dismissed within `seconds`: c10d's timeouts do not cover
// every wait of a rendezvous (a TCPStore client of LibTorch 1.13 waits forever for an answer
// from a 2.x store, such as a newer torchrun's), and a rank must never hang.
class JoinWatchdog {
 public:
  JoinWatchdog(double seconds, std::string what)
      : thread_([this, seconds, what = std::move(what)] {
          std::unique_lock<std::mutex> lock(mutex_);
          const auto limit = std::chrono::duration<double>(seconds);
          if (!dismissed_.wait_for(lock, limit, [this] { return done_; })) {
            std::fprintf(stderr, "trainer-run: %s: no group within %g s; giving up\n", what.c_str(),
                         seconds);
            std::_Exit(1);
          }
        }) {}
  ~JoinWatchdog() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      done_ = true;
    }
    dismissed_.notify_all();
    thread_.join();
  }

 private:
  std::mutex mutex_;
  std::condition_variable dismissed_;
  bool done_ = false;
  std::thread thread_;  // last: started once the members it uses exist
};

}  // namespace

Result<std::unique_ptr<DataParallelGroup>> DataParallelGroup::Join(const RankEnvironment& env,
                                                                   const torch::Device& device,
                                                                   double timeout_seconds) {
  const auto timeout = std::chrono::milliseconds(static_cast<std::int64_t>(timeout_seconds * 1e3));
  const std::string where = env.master_addr + ":" + std::to_string(env.master_port);
  constexpr double kWatchdogMargin = 10;  // past c10d's own timeout, which should come first
  const JoinWatchdog watchdog(timeout_seconds + kWatchdogMargin,
                              "rank " + std::to_string(env.rank) + " joining " + where);
  c10::intrusive_ptr<c10d::Store> store;
  try {
    c10d::TCPStoreOptions options;
    options.port = static_cast<std::uint16_t>(env.master_port);
    options.isServer = env.rank == 0 && !env.launcher_serves_store;
    options.numWorkers = env.world_size;
    options.waitWorkers = true;
    options.timeout = timeout;
    store = c10::make_intrusive<c10d::TCPStore>(env.master_addr, options);
    if (!env.store_prefix.empty()) {
      store = c10::make_intrusive<c10d::PrefixStore>(env.store_prefix, store);
    }
  } catch (const std::exception& e) {
    return Status::IOError("rank " + std::to_string(env.rank) + " of " +
                           std::to_string(env.world_size) + ": the job's store at " + where +
                           " (MASTER_ADDR:MASTER_PORT): " + e.what());
  }
  try {
    if (device.is_cuda()) {
#ifdef TRAINERD_WITH_CUDA
      // This process trains on GPU LOCAL_RANK: "cuda" means it from here on.
      const auto index = static_cast<c10::DeviceIndex>(env.local_rank);
      c10::cuda::set_device(index);
      const torch::Device rank_device(torch::kCUDA, index);
      return std::unique_ptr<DataParallelGroup>(new DataParallelGroup(
          env.rank, env.world_size, rank_device, "nccl", NcclGroup(store, env, timeout)));
#else
      return Status::InvalidArgument("a CUDA job needs a LibTorch with CUDA for NCCL");
#endif
    }
    return std::unique_ptr<DataParallelGroup>(new DataParallelGroup(
        env.rank, env.world_size, device, "gloo", GlooGroup(store, env, timeout)));
  } catch (const std::exception& e) {
    return Status::IOError("rank " + std::to_string(env.rank) + " of " +
                           std::to_string(env.world_size) + " could not join the group at " +
                           where + ": " + e.what());
  }
}

DataParallelGroup::DataParallelGroup(int rank, int world_size, torch::Device device,
                                     std::string backend,
                                     c10::intrusive_ptr<compat::CollectiveBackend> group)
    : rank_(rank),
      world_size_(world_size),
      device_(device),
      backend_(std::move(backend)),
      group_(std::move(group)) {}

DataParallelGroup::~DataParallelGroup() = default;

void DataParallelGroup::AllReduceSum(torch::Tensor& tensor) {
  std::vector<torch::Tensor> tensors = {tensor};
  c10d::AllreduceOptions options;
  options.reduceOp = c10d::ReduceOp::SUM;
  group_->allreduce(tensors, options)->wait();
}

double DataParallelGroup::Sum(double value) {
  torch::Tensor t = torch::full({1}, value, torch::TensorOptions(torch::kDouble).device(device_));
  AllReduceSum(t);
  return t.item<double>();
}

bool DataParallelGroup::Any(bool value) { return Sum(value ? 1.0 : 0.0) > 0; }

std::vector<bool> DataParallelGroup::AnyOf(const std::vector<bool>& values) {
  const std::vector<float> flags(values.begin(), values.end());
  torch::Tensor counts = torch::tensor(flags).to(device_);
  AllReduceSum(counts);
  counts = counts.cpu();
  const float* summed = counts.data_ptr<float>();
  std::vector<bool> result(values.size());
  for (std::size_t i = 0; i < values.size(); ++i) result[i] = summed[i] > 0;
  return result;
}

void DataParallelGroup::InBuckets(
    const std::vector<torch::Tensor>& tensors, const std::vector<torch::Tensor>& likes,
    const std::vector<int>& roots,
    const std::function<bool(torch::Tensor& flat, int root)>& collective) {
  torch::NoGradGuard no_grad;
  const auto bytes_of = [&](std::size_t i) { return static_cast<std::int64_t>(likes[i].nbytes()); };
  for (std::size_t first = 0, end = 0; first < tensors.size(); first = end) {
    std::int64_t bytes = bytes_of(first);
    for (end = first + 1; end < tensors.size(); ++end) {
      if (likes[end].scalar_type() != likes[first].scalar_type() || roots[end] != roots[first] ||
          bytes + bytes_of(end) > kBucketBytes) {
        break;
      }
      bytes += bytes_of(end);
    }
    // On the group's device (NCCL's), whichever device holds the tensors.
    std::vector<torch::Tensor> parts;
    parts.reserve(end - first);
    for (std::size_t i = first; i < end; ++i) {
      parts.push_back(tensors[i].defined()
                          ? tensors[i].reshape(-1).to(device_)
                          : torch::zeros({likes[i].numel()}, likes[i].options().device(device_)));
    }
    torch::Tensor flat = torch::cat(parts);
    if (!collective(flat, roots[first])) continue;
    std::int64_t offset = 0;
    for (std::size_t i = first; i < end; ++i) {
      torch::Tensor target = tensors[i];
      if (target.defined()) target.copy_(flat.narrow(0, offset, target.numel()).view_as(target));
      offset += likes[i].numel();
    }
  }
}

void DataParallelGroup::SumGradients(const std::vector<torch::Tensor>& parameters) {
  std::vector<torch::Tensor> gradients;
  for (const torch::Tensor& p : parameters) {
    if (p.grad().defined()) gradients.push_back(p.grad());
  }
  InBuckets(gradients, gradients, std::vector<int>(gradients.size(), 0),
            [this](torch::Tensor& flat, int /*root*/) {
              AllReduceSum(flat);
              return true;
            });
}

void DataParallelGroup::SumGradientsToOwners(const std::vector<torch::Tensor>& parameters,
                                             const std::vector<int>& owners,
                                             const std::vector<bool>& taking_part) {
  std::vector<torch::Tensor> gradients, likes;
  std::vector<int> roots;
  for (std::size_t i = 0; i < parameters.size(); ++i) {
    if (!taking_part[i]) continue;
    torch::Tensor p = parameters[i];
    if (owners[i] == rank_ && !p.grad().defined()) p.mutable_grad() = torch::zeros_like(p);
    gradients.push_back(p.grad());
    likes.push_back(p);
    roots.push_back(owners[i]);
  }
  InBuckets(gradients, likes, roots, [this](torch::Tensor& flat, int root) {
    std::vector<torch::Tensor> tensors = {flat};
    c10d::ReduceOptions options;
    options.reduceOp = c10d::ReduceOp::SUM;
    options.rootRank = root;
    group_->reduce(tensors, options)->wait();
    return root == rank_;
  });
}

void DataParallelGroup::BroadcastFromOwners(const std::vector<torch::Tensor>& tensors,
                                            const std::vector<int>& owners) {
  InBuckets(tensors, tensors, owners, [this](torch::Tensor& flat, int root) {
    std::vector<torch::Tensor> buffers = {flat};
    c10d::BroadcastOptions options;
    options.rootRank = root;
    group_->broadcast(buffers, options)->wait();
    return root != rank_;
  });
}

}  // namespace trainerd
