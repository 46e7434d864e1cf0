#include "trainerd/trainer/semantics/activation_offload.h"

#include <torch/csrc/autograd/engine.h>
#include <torch/csrc/autograd/saved_variable_hooks.h>

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "trainerd/trainer/device/device_memory.h"

#ifdef TRAINERD_WITH_CUDA
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAEvent.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#endif

namespace trainerd {
namespace {

std::atomic<std::int64_t> offloaded_bytes{0};

// One storage's copy in host memory, as a flat tensor of the saved tensor's dtype, shared by
// the saves of its tensors in one scope: what the graph kept alive on the device, the storage
// of a view included; on CUDA with the event its copy out recorded.
class HostCopy {
 public:
  explicit HostCopy(const torch::Tensor& saved, bool restored_stale);
  ~HostCopy();
  HostCopy(const HostCopy&) = delete;
  HostCopy& operator=(const HostCopy&) = delete;
  // The storage back on the device, flat: one copy while any restored view of it lives (q, k
  // and v of one product are restored together, not thrice).
  torch::Tensor Restore();

 private:
  torch::Tensor CopyBack();

  torch::Tensor host_;
  std::optional<c10::weak_intrusive_ptr<c10::TensorImpl, c10::UndefinedTensorImpl>> restored_;
  torch::Device device_;
  bool pooled_;  // restored_stale: back to the pool when freed
#ifdef TRAINERD_WITH_CUDA
  std::optional<c10::cuda::CUDAEvent> copied_;
#endif
};

// TEST ONLY (kOffloadRestoredStale): freed host copies by shape and dtype, handed out again
// unwritten.
using PoolKey = std::pair<std::vector<std::int64_t>, c10::ScalarType>;
std::mutex pool_mutex;
std::multimap<PoolKey, torch::Tensor>& StalePool() {
  static auto* pool = new std::multimap<PoolKey, torch::Tensor>();
  return *pool;
}
PoolKey KeyOf(const torch::Tensor& t) { return {t.sizes().vec(), t.scalar_type()}; }

torch::Tensor TakeFromPool(const torch::Tensor& like) {
  const std::lock_guard<std::mutex> lock(pool_mutex);
  auto found = StalePool().find(KeyOf(like));
  if (found == StalePool().end()) return {};
  torch::Tensor host = std::move(found->second);
  StalePool().erase(found);
  return host;
}

// The whole storage of `t`, flat, in its dtype.
torch::Tensor FlatStorageOf(const torch::Tensor& t) {
  const auto elements = static_cast<std::int64_t>(t.storage().nbytes() / t.element_size());
  return torch::empty({0}, t.options()).set_(t.storage(), 0, {elements}, {1});
}

HostCopy::HostCopy(const torch::Tensor& saved, bool restored_stale)
    : device_(saved.device()), pooled_(restored_stale) {
  const torch::Tensor source = FlatStorageOf(saved.detach());
  if (pooled_) host_ = TakeFromPool(source);
  const bool stale = host_.defined();
  if (!stale) {
    const HostMemoryScope host;
    host_ = torch::empty_like(source,
                              source.options().device(torch::kCPU).pinned_memory(source.is_cuda()));
  }
  offloaded_bytes += static_cast<std::int64_t>(host_.nbytes());
  if (stale) return;  // the fault: an earlier tensor's values, never overwritten
#ifdef TRAINERD_WITH_CUDA
  if (source.is_cuda()) {
    const c10::cuda::CUDAGuard guard(source.device());
    static thread_local std::unordered_map<c10::DeviceIndex, c10::cuda::CUDAStream> copy_streams;
    const c10::DeviceIndex index = source.device().index();
    auto stream = copy_streams.find(index);
    if (stream == copy_streams.end()) {
      stream = copy_streams.emplace(index, c10::cuda::getStreamFromPool(false, index)).first;
    }
    const c10::cuda::CUDAStream compute = c10::cuda::getCurrentCUDAStream(index);
    c10::cuda::CUDAEvent made;
    made.record(compute);
    made.block(stream->second);
    {
      const c10::cuda::CUDAStreamGuard on_copy_stream(stream->second);
      host_.copy_(source, /*non_blocking=*/true);
    }
    // The device tensor stays allocated until the copy stream is done with it.
    c10::cuda::CUDACachingAllocator::recordStream(source.storage().data_ptr(), stream->second);
    copied_.emplace();
    copied_->record(stream->second);
    return;
  }
#endif
  host_.copy_(source);
}

HostCopy::~HostCopy() {
  offloaded_bytes -= static_cast<std::int64_t>(host_.nbytes());
  if (!pooled_) return;
  const std::lock_guard<std::mutex> lock(pool_mutex);
  StalePool().emplace(KeyOf(host_), host_);
}

torch::Tensor HostCopy::Restore() {
  if (restored_) {
    torch::Tensor alive(restored_->lock());
    if (alive.defined()) return alive;
  }
  torch::Tensor restored = CopyBack();
  restored_.emplace(restored.getIntrusivePtr());
  return restored;
}

torch::Tensor HostCopy::CopyBack() {
#ifdef TRAINERD_WITH_CUDA
  if (device_.is_cuda()) {
    const c10::cuda::CUDAGuard guard(device_);
    if (copied_) copied_->block(c10::cuda::getCurrentCUDAStream(device_.index()));
    return host_.to(device_, /*non_blocking=*/true);
  }
#endif
  return host_.clone();  // on the CPU's device count, as the original was
}

// What one scope copied, by storage, so that the tensors saved of one storage (a tensor saved
// twice, views of one product), unchanged in between, share one copy; and what stays.
struct ScopeState {
  std::unordered_set<const void*> resident_storages;
  struct Entry {
    c10::weak_intrusive_ptr<c10::StorageImpl> storage;
    std::uint32_t version;  // a view shares its base's version counter
    c10::ScalarType dtype;
    std::shared_ptr<HostCopy> copy;
  };
  std::unordered_map<const c10::StorageImpl*, Entry> copies;
  bool restored_stale = false;
};
thread_local ScopeState* current_scope = nullptr;

std::shared_ptr<HostCopy> CopyOf(ScopeState& scope, const torch::Tensor& tensor) {
  const std::uint32_t version = tensor._version();
  c10::StorageImpl* storage = tensor.storage().unsafeGetStorageImpl();
  auto found = scope.copies.find(storage);
  if (found != scope.copies.end() && found->second.version == version &&
      found->second.dtype == tensor.scalar_type() &&
      found->second.storage.lock().get() == storage) {
    return found->second.copy;
  }
  auto copy = std::make_shared<HostCopy>(tensor, scope.restored_stale);
  scope.copies.insert_or_assign(
      storage, ScopeState::Entry{
                   c10::weak_intrusive_ptr<c10::StorageImpl>(tensor.storage().getWeakStorageImpl()),
                   version, tensor.scalar_type(), copy});
  return copy;
}

// The hooks of one saved tensor: packed in a scope, its storage's host copy and where in it
// the tensor lies, restored with the same sizes, strides and offset (the backward's kernels see
// the layout the forward made: a transposed operand takes another BLAS path, rounded
// otherwise); a resident tensor as it is.
class OffloadHooks final : public torch::autograd::SavedVariableHooks {
 public:
  explicit OffloadHooks(ScopeState& scope) : scope_(scope) {}
  void call_pack_hook(const at::Tensor& tensor) override {
    if (!tensor.has_storage() || tensor.numel() == 0 ||
        scope_.resident_storages.count(tensor.storage().unsafeGetStorageImpl()) > 0) {
      kept_ = tensor;
      return;
    }
    copy_ = CopyOf(scope_, tensor);
    sizes_ = tensor.sizes().vec();
    strides_ = tensor.strides().vec();
    offset_ = tensor.storage_offset();
  }
  at::Tensor call_unpack_hook() override {
    return copy_ ? copy_->Restore().as_strided(sizes_, strides_, offset_) : kept_;
  }

 private:
  ScopeState& scope_;  // outlives the packing, which happens inside the scope
  torch::Tensor kept_;
  std::shared_ptr<HostCopy> copy_;
  std::vector<std::int64_t> sizes_, strides_;
  std::int64_t offset_ = 0;
};

// The default engine, but for the hooks it hands out inside a scope.
class OffloadingEngine final : public torch::autograd::Engine {
 public:
  std::unique_ptr<torch::autograd::SavedVariableHooks> get_default_saved_variable_hooks() override {
    if (current_scope == nullptr) return nullptr;
    return std::make_unique<OffloadHooks>(*current_scope);
  }
  ~OffloadingEngine() override { stop(); }
  static torch::autograd::Engine& Get() {
    static OffloadingEngine engine;
    return engine;
  }
};

}  // namespace

ActivationOffloadScope::ActivationOffloadScope(const std::vector<torch::Tensor>& resident,
                                               const std::vector<torch::Tensor>& buffers,
                                               bool restored_stale) {
  static std::once_flag installed;
  std::call_once(installed,
                 [] { torch::autograd::set_default_engine_stub(&OffloadingEngine::Get); });
  TORCH_CHECK(current_scope == nullptr, "activation offload scopes do not nest");
  auto* scope = new ScopeState();
  for (const auto* list : {&resident, &buffers}) {
    for (const torch::Tensor& t : *list) {
      if (t.defined() && t.has_storage()) {
        scope->resident_storages.insert(t.storage().unsafeGetStorageImpl());
      }
    }
  }
  scope->restored_stale = restored_stale;
  current_scope = scope;
}

ActivationOffloadScope::~ActivationOffloadScope() {
  delete current_scope;
  current_scope = nullptr;
}

std::int64_t OffloadedActivationBytes() { return offloaded_bytes.load(); }

}  // namespace trainerd
