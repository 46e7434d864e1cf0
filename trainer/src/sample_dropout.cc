#include "trainerd/trainer/sample_dropout.h"

#include <torch/torch.h>

#include "trainerd/common/mix.h"
#include "trainerd/trainer/op_profiler.h"
#include "trainerd/trainer/torch_compat.h"

namespace trainerd {
namespace {

thread_local std::optional<SampleStream> current_stream;

}  // namespace

SampleStreamScope::SampleStreamScope(std::optional<SampleStream> stream)
    : previous_(current_stream) {
  current_stream = stream;
}

SampleStreamScope::~SampleStreamScope() { current_stream = previous_; }

const std::optional<SampleStream>& SampleStreamScope::Current() { return current_stream; }

SampleDropoutImpl::SampleDropoutImpl(double p, int site) : p_(p), site_(site) {
  TORCH_CHECK(p >= 0 && p < 1, "dropout probability ", p, " is outside [0, 1)");
}

torch::Tensor SampleDropoutImpl::forward(const torch::Tensor& x) {
  if (!is_training() || p_ == 0) return x;
  RECORD_USER_SCOPE(kDropoutScope);  // the op profiler's "dropout" group
  const std::optional<SampleStream>& stream = current_stream;
  if (!stream) return torch::dropout(x, p_, /*train=*/true);
  torch::Tensor noise = torch::empty_like(x, at::MemoryFormat::Contiguous);
  const std::uint64_t site_key = Mix(stream->seed ^ Mix(static_cast<std::uint64_t>(site_) + 1));
  for (std::int64_t row = 0; row < x.size(0); ++row) {
    const auto sample = static_cast<std::uint64_t>(stream->first_sample + row);
    at::Generator generator = compat::MakeGenerator(x.device(), Mix(site_key ^ Mix(sample)));
    noise[row].bernoulli_(1 - p_, generator);
  }
  noise.div_(1 - p_);
  return x * noise;
}

}  // namespace trainerd
