#include "trainerd/trainer/semantics/sample_dropout.h"

#include <ATen/Dispatch.h>
#include <ATen/Parallel.h>
#include <torch/torch.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "trainerd/trainer/device/op_scopes.h"
#include "trainerd/trainer/device/torch_compat.h"
#include "trainerd/trainer/semantics/dropout_counters.h"

namespace trainerd {
namespace {

thread_local std::optional<SampleStream> current_stream;

// Elements of a row dropped at a time.
constexpr std::int64_t kChunk = 1024;

// out[k] = in[k] * scale where element first + k of the row is kept, else 0, for k < count
// (at most kChunk): the flags drawn onto the stack, then applied in `Compute`.
template <typename scalar_t, typename Compute>
void DropChunk(std::uint32_t row_seed, std::uint32_t first, std::int64_t count,
               std::uint32_t keep_below, Compute scale, const scalar_t* in, scalar_t* out) {
  std::uint8_t keep[kChunk];
  KeepFlags(row_seed, first, count, keep_below, keep);
  for (std::int64_t k = 0; k < count; ++k) {
    out[k] = keep[k] != 0 ? static_cast<scalar_t>(static_cast<Compute>(in[k]) * scale)
                          : static_cast<scalar_t>(0);
  }
}

// Float rows in one pass, without the flags in between.
void DropChunk(std::uint32_t row_seed, std::uint32_t first, std::int64_t count,
               std::uint32_t keep_below, float scale, const float* in, float* out) {
  DropFloats(row_seed, first, count, keep_below, scale, in, out);
}

// in * keep / (1 - p), with the keep flags of `counters` (row b is the sample first_sample + b,
// element j of a row its j-th in memory order). Forward and backward both call it: the same
// counters give the same mask.
torch::Tensor ApplyCounterMask(const torch::Tensor& in, const DropoutCounters& counters) {
  const torch::Tensor x = in.contiguous();
  torch::Tensor out = torch::empty_like(x);
  if (x.numel() == 0) return out;
  const std::int64_t columns = x.numel() / x.size(0);
  const std::uint32_t keep_below = counters.KeepBelow();
  constexpr std::int64_t kGrain = 1 << 15;
  AT_DISPATCH_FLOATING_TYPES_AND2(
      at::kBFloat16, at::kHalf, x.scalar_type(), "counter_dropout", [&] {
        using Compute = std::conditional_t<std::is_same_v<scalar_t, double>, double, float>;
        const auto scale = static_cast<Compute>(counters.KeptScale());
        const scalar_t* source = x.data_ptr<scalar_t>();
        scalar_t* target = out.data_ptr<scalar_t>();
        at::parallel_for(0, x.numel(), kGrain, [&](std::int64_t begin, std::int64_t end) {
          for (std::int64_t i = begin; i < end;) {
            const std::int64_t row = i / columns;
            const std::int64_t column = i % columns;
            const std::int64_t count = std::min({kChunk, columns - column, end - i});
            DropChunk(counters.RowSeed(row), static_cast<std::uint32_t>(column), count, keep_below,
                      scale, source + i, target + i);
            i += count;
          }
        });
      });
  return out;
}

// Dropout whose backward regenerates the mask from its counters instead of keeping it.
class RegeneratedDropout : public torch::autograd::Function<RegeneratedDropout> {
 public:
  static torch::Tensor forward(torch::autograd::AutogradContext* context, const torch::Tensor& x,
                               const DropoutCounters& counters) {
    SaveDropoutCounters(context, counters);
    return ApplyCounterMask(x, counters);
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* context,
                                                 torch::autograd::variable_list grad) {
    return {ApplyCounterMask(grad[0], *SavedDropoutCounters(context)), torch::Tensor()};
  }
};

}  // namespace

void SaveDropoutCounters(torch::autograd::AutogradContext* context,
                         const std::optional<DropoutCounters>& counters) {
  auto& data = context->saved_data;
  data["has_dropout"] = counters.has_value();
  if (!counters) return;
  data["site_key"] = static_cast<std::int64_t>(counters->site_key);
  data["first_sample"] = counters->first_sample;
  data["p"] = counters->p;
}

std::optional<DropoutCounters> SavedDropoutCounters(
    const torch::autograd::AutogradContext* context) {
  const auto& data = context->saved_data;
  if (!data.at("has_dropout").toBool()) return std::nullopt;
  return DropoutCounters{static_cast<std::uint64_t>(data.at("site_key").toInt()),
                         data.at("first_sample").toInt(), data.at("p").toDouble()};
}

SampleStreamScope::SampleStreamScope(std::optional<SampleStream> stream)
    : previous_(current_stream) {
  current_stream = stream;
}

SampleStreamScope::~SampleStreamScope() { current_stream = previous_; }

const std::optional<SampleStream>& SampleStreamScope::Current() { return current_stream; }

SampleDropoutImpl::SampleDropoutImpl(double p, int site, DropoutMasks masks)
    : p_(p), site_(site), masks_(masks) {
  TORCH_CHECK(p >= 0 && p < 1, "dropout probability ", p, " is outside [0, 1)");
}

std::optional<DropoutCounters> SampleDropoutImpl::counters() const {
  if (!is_training() || p_ == 0) return std::nullopt;
  const std::optional<SampleStream>& stream = current_stream;
  if (!stream) {
    // Outside a sample stream the mask is drawn from the default generator, as ordinary
    // dropout's is.
    const auto key = torch::randint(std::numeric_limits<std::int64_t>::max(), {1}, torch::kLong);
    return DropoutCounters{static_cast<std::uint64_t>(key.item<std::int64_t>()), 0, p_};
  }
  return DropoutCounters{DropoutSiteKey(stream->seed, site_), stream->first_sample, p_};
}

torch::Tensor SampleDropoutImpl::forward(const torch::Tensor& x) {
  if (!is_training() || p_ == 0) return x;
  RECORD_USER_SCOPE(kDropoutScope);  // the op profiler's "dropout" group
  if (!current_stream) return torch::dropout(x, p_, /*train=*/true);
  const DropoutCounters counters = *this->counters();
  if (masks_ == DropoutMasks::kRegenerated && x.is_cpu()) {
    return RegeneratedDropout::apply(x, counters);
  }
  torch::Tensor noise = torch::empty_like(x, at::MemoryFormat::Contiguous);
  for (std::int64_t row = 0; row < x.size(0); ++row) {
    at::Generator generator = compat::MakeGenerator(x.device(), counters.RowKey(row));
    noise[row].bernoulli_(1 - p_, generator);
  }
  noise.div_(1 - p_);
  return x * noise;
}

}  // namespace trainerd
