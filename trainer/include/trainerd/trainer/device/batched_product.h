// c[i] = a[i] @ b[i] (+ c[i]) for a batch of small matrices held as strided views, with one
// BLAS call per matrix and no LibTorch op between them. LibTorch's own bmm on such views goes
// through select and addmm for each matrix (a dispatcher round trip each), which costs more
// than the product itself at the sizes of a block of attention (64 x 64 x 256): this is what
// the blockwise attention multiplies with.
#pragma once

#include <torch/types.h>

namespace trainerd {

// Whether `c += / = a @ b` is done for a and b [n, m, k] and [n, k, n'] views: the fused path
// takes float tensors whose last two dimensions are row- or column-major (one of their
// strides 1), c row-major, when the process's BLAS exports the Fortran sgemm_ (OpenBLAS,
// MKL). Otherwise BatchedProduct uses LibTorch's bmm.
bool BatchedProductIsDirect(const torch::Tensor& c, const torch::Tensor& a, const torch::Tensor& b);

// c = a @ b (accumulate false) or c += a @ b (accumulate true), batched over the first
// dimension. c may be a wider dtype than a and b (float accumulators for bfloat16).
void BatchedProduct(torch::Tensor c, const torch::Tensor& a, const torch::Tensor& b,
                    bool accumulate);

}  // namespace trainerd
