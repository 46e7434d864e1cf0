#include "trainerd/trainer/device/batched_product.h"

#include <dlfcn.h>
#include <torch/torch.h>

#include <algorithm>
#include <climits>
#include <optional>

namespace trainerd {
namespace {

// The Fortran BLAS entry point both OpenBLAS (Debian's libblas.so.3, LibTorch 1.13) and the
// MKL inside the PyPI wheel's libtorch_cpu.so (2.x) export, with 32-bit integers.
using Sgemm = void (*)(const char* transa, const char* transb, const int* m, const int* n,
                       const int* k, const float* alpha, const float* a, const int* lda,
                       const float* b, const int* ldb, const float* beta, float* c, const int* ldc);

Sgemm ProcessSgemm() {
  static const Sgemm sgemm = reinterpret_cast<Sgemm>(::dlsym(RTLD_DEFAULT, "sgemm_"));
  return sgemm;
}

// A matrix as BLAS takes it: row-major with rows `ld` apart, or stored transposed.
struct Layout {
  bool transposed;
  std::int64_t ld;
};

std::optional<Layout> LayoutOf(const torch::Tensor& x) {
  const std::int64_t rows = x.size(1), cols = x.size(2);
  if (x.stride(2) == 1 || cols == 1) {
    return Layout{false, std::max<std::int64_t>(x.stride(1), cols)};
  }
  if (x.stride(1) == 1 || rows == 1) {
    return Layout{true, std::max<std::int64_t>(x.stride(2), rows)};
  }
  return std::nullopt;
}

bool FitsInt(const torch::Tensor& x) {
  for (const std::int64_t v : x.sizes()) {
    if (v > INT_MAX) return false;
  }
  for (const std::int64_t v : x.strides()) {
    if (v > INT_MAX) return false;
  }
  return true;
}

// The layouts of c, a and b when the product is direct (BatchedProductIsDirect), else none.
struct DirectLayouts {
  Layout c, a, b;
};

std::optional<DirectLayouts> DirectLayoutsOf(const torch::Tensor& c, const torch::Tensor& a,
                                             const torch::Tensor& b) {
  for (const torch::Tensor* x : {&c, &a, &b}) {
    if (x->scalar_type() != torch::kFloat || !x->is_cpu() || x->dim() != 3 || !FitsInt(*x)) {
      return std::nullopt;
    }
  }
  const std::optional<Layout> lc = LayoutOf(c), la = LayoutOf(a), lb = LayoutOf(b);
  if (ProcessSgemm() == nullptr || !lc || lc->transposed || !la || !lb) return std::nullopt;
  return DirectLayouts{*lc, *la, *lb};
}

}  // namespace

bool BatchedProductIsDirect(const torch::Tensor& c, const torch::Tensor& a,
                            const torch::Tensor& b) {
  return DirectLayoutsOf(c, a, b).has_value();
}

void BatchedProduct(torch::Tensor c, const torch::Tensor& a, const torch::Tensor& b,
                    bool accumulate) {
  TORCH_CHECK(a.dim() == 3 && b.dim() == 3 && c.dim() == 3 && a.size(0) == b.size(0) &&
                  a.size(0) == c.size(0) && a.size(2) == b.size(1) && c.size(1) == a.size(1) &&
                  c.size(2) == b.size(2),
              "BatchedProduct: shapes ", c.sizes(), " = ", a.sizes(), " @ ", b.sizes());
  const std::optional<DirectLayouts> layouts = DirectLayoutsOf(c, a, b);
  if (!layouts) {
    if (!accumulate) {
      c.copy_(at::bmm(a, b));
    } else if (c.scalar_type() == a.scalar_type()) {
      c.baddbmm_(a, b);
    } else {
      c.add_(at::bmm(a, b));
    }
    return;
  }
  if (c.numel() == 0) return;
  if (a.size(2) == 0) {
    if (!accumulate) c.zero_();
    return;
  }
  // Row-major C = A B is column-major C^T = B^T A^T: BLAS gets B first, and a row-major
  // operand is its column-major transpose, so "N" where the view is row-major.
  const Layout &la = layouts->a, &lb = layouts->b, &lc = layouts->c;
  const char ta = la.transposed ? 'T' : 'N', tb = lb.transposed ? 'T' : 'N';
  const int m = static_cast<int>(c.size(2)), n = static_cast<int>(c.size(1)),
            k = static_cast<int>(a.size(2));
  const int lda = static_cast<int>(la.ld), ldb = static_cast<int>(lb.ld),
            ldc = static_cast<int>(lc.ld);
  const float alpha = 1, beta = accumulate ? 1 : 0;
  const float* a_data = a.data_ptr<float>();
  const float* b_data = b.data_ptr<float>();
  float* c_data = c.data_ptr<float>();
  const Sgemm sgemm = ProcessSgemm();
  for (std::int64_t i = 0; i < c.size(0); ++i) {
    sgemm(&tb, &ta, &m, &n, &k, &alpha, b_data + i * b.stride(0), &ldb, a_data + i * a.stride(0),
          &lda, &beta, c_data + i * c.stride(0), &ldc);
  }
}

}  // namespace trainerd
