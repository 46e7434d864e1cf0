#include "trainerd/trainer/sample_dropout.h"

#include <ATen/Dispatch.h>
#include <ATen/Parallel.h>
#include <torch/torch.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "trainerd/common/mix.h"
#include "trainerd/trainer/op_profiler.h"
#include "trainerd/trainer/torch_compat.h"

namespace trainerd {
namespace {

thread_local std::optional<SampleStream> current_stream;

std::uint64_t SiteKey(const SampleStream& stream, int site) {
  return Mix(stream.seed ^ Mix(static_cast<std::uint64_t>(site) + 1));
}

std::uint64_t RowKey(std::uint64_t site_key, std::int64_t sample) {
  return Mix(site_key ^ Mix(static_cast<std::uint64_t>(sample)));
}

// The keep flags (1 or 0) of columns [first, first + count) of a row: element j is kept when
// the 32-bit MurmurHash3 finaliser of the Weyl sequence row_seed + j * golden is below
// keep_below. Written for the compiler to vectorise (an AVX2 clone where the CPU has it).
__attribute__((target_clones("avx2", "default"))) void KeepFlags(std::uint32_t row_seed,
                                                                 std::uint32_t first,
                                                                 std::int64_t count,
                                                                 std::uint32_t keep_below,
                                                                 std::uint8_t* keep) {
  for (std::int64_t i = 0; i < count; ++i) {
    std::uint32_t x = row_seed + (first + static_cast<std::uint32_t>(i)) * 0x9E3779B9U;
    x ^= x >> 16;
    x *= 0x85EBCA6BU;
    x ^= x >> 13;
    x *= 0xC2B2AE35U;
    x ^= x >> 16;
    keep[i] = x < keep_below ? 1 : 0;
  }
}

// in * keep / (1 - p), with KeepFlags of the row's key (row b is the sample first_sample + b).
// Forward and backward both call it: the same counters give the same mask.
torch::Tensor ApplyCounterMask(const torch::Tensor& in, std::uint64_t site_key,
                               std::int64_t first_sample, double p) {
  const torch::Tensor x = in.contiguous();
  torch::Tensor out = torch::empty_like(x);
  if (x.numel() == 0) return out;
  const std::int64_t columns = x.numel() / x.size(0);
  const auto keep_below = static_cast<std::uint32_t>(std::min((1 - p) * 0x1p32, 0x1p32 - 1));
  constexpr std::int64_t kGrain = 1 << 15;
  constexpr std::int64_t kChunk = 1024;  // flags drawn at a time, on the stack
  AT_DISPATCH_FLOATING_TYPES_AND2(
      at::kBFloat16, at::kHalf, x.scalar_type(), "counter_dropout", [&] {
        using Compute = std::conditional_t<std::is_same_v<scalar_t, double>, double, float>;
        const auto scale = static_cast<Compute>(1 / (1 - p));
        const scalar_t* source = x.data_ptr<scalar_t>();
        scalar_t* target = out.data_ptr<scalar_t>();
        at::parallel_for(0, x.numel(), kGrain, [&](std::int64_t begin, std::int64_t end) {
          std::uint8_t keep[kChunk];
          for (std::int64_t i = begin; i < end;) {
            const std::int64_t row = i / columns;
            const std::int64_t column = i % columns;
            const std::int64_t count = std::min({kChunk, columns - column, end - i});
            const std::uint64_t key = RowKey(site_key, first_sample + row);
            KeepFlags(static_cast<std::uint32_t>(key ^ (key >> 32)),
                      static_cast<std::uint32_t>(column), count, keep_below, keep);
            for (std::int64_t k = 0; k < count; ++k) {
              target[i + k] =
                  keep[k] != 0 ? static_cast<scalar_t>(static_cast<Compute>(source[i + k]) * scale)
                               : static_cast<scalar_t>(0);
            }
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
                               std::int64_t site_key, std::int64_t first_sample, double p) {
    context->saved_data["site_key"] = site_key;
    context->saved_data["first_sample"] = first_sample;
    context->saved_data["p"] = p;
    return ApplyCounterMask(x, static_cast<std::uint64_t>(site_key), first_sample, p);
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* context,
                                                 torch::autograd::variable_list grad) {
    const auto site_key = static_cast<std::uint64_t>(context->saved_data["site_key"].toInt());
    const torch::Tensor dx =
        ApplyCounterMask(grad[0], site_key, context->saved_data["first_sample"].toInt(),
                         context->saved_data["p"].toDouble());
    return {dx, torch::Tensor(), torch::Tensor(), torch::Tensor()};
  }
};

}  // namespace

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

torch::Tensor SampleDropoutImpl::forward(const torch::Tensor& x) {
  if (!is_training() || p_ == 0) return x;
  RECORD_USER_SCOPE(kDropoutScope);  // the op profiler's "dropout" group
  const std::optional<SampleStream>& stream = current_stream;
  if (!stream) return torch::dropout(x, p_, /*train=*/true);
  const std::uint64_t site_key = SiteKey(*stream, site_);
  if (masks_ == DropoutMasks::kRegenerated && x.is_cpu()) {
    return RegeneratedDropout::apply(x, static_cast<std::int64_t>(site_key), stream->first_sample,
                                     p_);
  }
  torch::Tensor noise = torch::empty_like(x, at::MemoryFormat::Contiguous);
  for (std::int64_t row = 0; row < x.size(0); ++row) {
    at::Generator generator =
        compat::MakeGenerator(x.device(), RowKey(site_key, stream->first_sample + row));
    noise[row].bernoulli_(1 - p_, generator);
  }
  noise.div_(1 - p_);
  return x * noise;
}

}  // namespace trainerd
