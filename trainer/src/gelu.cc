#include "trainerd/trainer/gelu.h"

#include <ATen/Dispatch.h>
#include <ATen/Parallel.h>
#include <torch/torch.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "float_lanes.h"

namespace trainerd {
namespace {

using namespace lanes;  // NOLINT(google-build-using-namespace): the kernels' vocabulary

constexpr float kInverseSqrt2 = 0.70710678118654752F;
constexpr float kInverseSqrt2Pi = 0.39894228040143268F;

// erf(z) for z >= 0 (Abramowitz and Stegun 7.1.26), and exp(-z * z), which it computes and
// GELU's derivative needs.
struct ErfAndGaussian {
  Float8 erf, gaussian;
};

__attribute__((always_inline)) inline ErfAndGaussian NonNegativeErf(Float8 z) {
  const Float8 t = 1.0F / (1.0F + 0.3275911F * z);
  Float8 poly = 1.061405429F * t - 1.453152027F;
  poly = poly * t + 1.421413741F;
  poly = poly * t - 0.284496736F;
  poly = poly * t + 0.254829592F;
  const Float8 gaussian = Exp(-z * z);
  return {1.0F - poly * t * gaussian, gaussian};
}

// Phi(x) = (1 + erf(x / sqrt 2)) / 2 and phi(x) = exp(-x^2 / 2) / sqrt(2 pi).
struct NormalCdfAndPdf {
  Float8 cdf, pdf;
};

__attribute__((always_inline)) inline NormalCdfAndPdf Normal(Float8 x) {
  const Float8 z = x * kInverseSqrt2;
  const Float8 magnitude = z < 0.0F ? -z : z;
  const ErfAndGaussian e = NonNegativeErf(magnitude);
  const Float8 erf = z < 0.0F ? -e.erf : e.erf;
  return {0.5F * (1.0F + erf), e.gaussian * kInverseSqrt2Pi};
}

__attribute__((target_clones("avx2", "default"))) void GeluForward(const float* x, std::int64_t n,
                                                                   float* y) {
  ForLanes(
      n, [&](std::int64_t j, std::int64_t count) __attribute__((always_inline)) {
        const Float8 v = Load(x + j, count);
        StoreLanes(v * Normal(v).cdf, y + j, count);
      });
}

// dx = dy * (Phi(x) + x * phi(x)).
__attribute__((target_clones("avx2", "default"))) void GeluBackward(const float* x, const float* dy,
                                                                    std::int64_t n, float* dx) {
  ForLanes(
      n, [&](std::int64_t j, std::int64_t count) __attribute__((always_inline)) {
        const Float8 v = Load(x + j, count);
        const NormalCdfAndPdf normal = Normal(v);
        StoreLanes(Load(dy + j, count) * (normal.cdf + v * normal.pdf), dx + j, count);
      });
}

constexpr std::int64_t kChunk = 1024;  // elements converted to float at a time, on the stack

// Runs `kernel(float inputs..., count, float* out)` over tensors of one dtype, chunk by chunk,
// converting to and from float where the dtype is not float.
template <typename Kernel>
torch::Tensor MapChunks(const std::vector<torch::Tensor>& inputs, Kernel kernel) {
  std::vector<torch::Tensor> in;
  for (const torch::Tensor& t : inputs) in.push_back(t.contiguous());
  torch::Tensor out = torch::empty_like(in[0], at::MemoryFormat::Contiguous);
  AT_DISPATCH_FLOATING_TYPES_AND(at::kBFloat16, in[0].scalar_type(), "vector_gelu", [&] {
    std::vector<const scalar_t*> sources;
    for (const torch::Tensor& t : in) sources.push_back(t.data_ptr<scalar_t>());
    scalar_t* target = out.data_ptr<scalar_t>();
    at::parallel_for(0, out.numel(), 32 * kChunk, [&](std::int64_t begin, std::int64_t end) {
      float buffers[3][kChunk];
      for (std::int64_t i = begin; i < end; i += kChunk) {
        const std::int64_t count = std::min(kChunk, end - i);
        const float* args[2] = {};
        for (std::size_t a = 0; a < sources.size(); ++a) {
          if constexpr (std::is_same_v<scalar_t, float>) {
            args[a] = sources[a] + i;
          } else {
            for (std::int64_t k = 0; k < count; ++k) {
              buffers[a][k] = static_cast<float>(sources[a][i + k]);
            }
            args[a] = buffers[a];
          }
        }
        float* result = buffers[2];
        if constexpr (std::is_same_v<scalar_t, float>) result = target + i;
        kernel(args, count, result);
        if constexpr (!std::is_same_v<scalar_t, float>) {
          for (std::int64_t k = 0; k < count; ++k) target[i + k] = static_cast<scalar_t>(result[k]);
        }
      }
    });
  });
  return out;
}

class VectorGeluFunction : public torch::autograd::Function<VectorGeluFunction> {
 public:
  static torch::Tensor forward(torch::autograd::AutogradContext* context, const torch::Tensor& x) {
    context->save_for_backward({x});
    return MapChunks({x}, [](const float* const* in, std::int64_t count, float* out) {
      GeluForward(in[0], count, out);
    });
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* context,
                                                 torch::autograd::variable_list grad) {
    const torch::Tensor x = context->get_saved_variables()[0];
    return {MapChunks({x, grad[0].to(x.scalar_type())},
                      [](const float* const* in, std::int64_t count, float* out) {
                        GeluBackward(in[0], in[1], count, out);
                      })};
  }
};

}  // namespace

bool VectorGeluSupports(const torch::Tensor& x) {
  return x.is_cpu() && (x.scalar_type() == torch::kFloat || x.scalar_type() == torch::kBFloat16);
}

torch::Tensor VectorGelu(const torch::Tensor& x) {
  TORCH_CHECK(VectorGeluSupports(x), "VectorGelu takes CPU float or bfloat16 tensors, got ",
              x.scalar_type(), " on ", x.device());
  return VectorGeluFunction::apply(x);
}

}  // namespace trainerd
