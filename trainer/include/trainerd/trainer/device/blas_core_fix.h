// OpenBLAS chooses its kernels once, when it is loaded, from the CPU's identity or from
// OPENBLAS_CORETYPE. Where it chose kernels narrower than the CPU (BlasBelowTheCpu), a worker
// restarts itself with OPENBLAS_CORETYPE naming the core that serves the CPU, once a child
// process has run that core's matrix product against a float64 reference and it matched.
// The restarted worker reads what was done from TRAINERD_BLAS_CORE_FIX, which also stops a
// second restart; its device_info.blas_core_fix says it.
#pragma once

#include <torch/types.h>

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "trainerd/common/cpu_isa.h"
#include "trainerd/trainer/device/blas_kernel.h"

namespace trainerd {

// The core OPENBLAS_CORETYPE should name: the CPU's, where `blas` chose kernels below it.
std::optional<std::string> CoreToForce(const BlasKernel& blas, const CpuIsa& isa);

// One process's matrix product, checked and timed (`trainer-run --check-blas`).
struct BlasProductCheck {
  BlasKernel blas;
  // max |C - C64| / sum_k |a_ik b_kj| over a 256 x 256 fp32 product C against its float64
  // reference C64 computed without the BLAS.
  double max_error = 0;
  // The BLAS's fp32 products on one thread (MeasureMatmulFlops: 1024^3), in GFLOP/s.
  double gflops = 0;
  static constexpr double kTolerance = 1e-5;
  bool ok() const { return max_error <= kTolerance; }
};

using MatrixProduct = std::function<torch::Tensor(const torch::Tensor&, const torch::Tensor&)>;

// Checks `product` and times the BLAS, on one thread; the process's thread count is restored
// after.
BlasProductCheck CheckBlasProduct(const MatrixProduct& product);
// The BLAS's own: torch::mm.
BlasProductCheck CheckBlasProduct();

// What `trainer-run --check-blas` prints, and how the worker reads it back.
std::string BlasProductCheckJson(const BlasProductCheck& check);
std::optional<BlasProductCheck> ParseBlasProductCheckJson(const std::string& text);

// The worker's step before anything else: when `blas` (this process's, DescribeThisBlas)
// chose kernels below `isa`, run `self --check-blas` with OPENBLAS_CORETYPE set to the CPU's
// core; when that core was chosen and its product matched, exec `self argv...` with it set
// (this call then does not return).
// Returns why it did not (the check failed, died or chose another core; exec failed), which
// is also the record, or nothing when there was nothing to do or the process is the
// restarted one.
std::optional<std::string> FixBlasCore(const std::string& self,
                                       const std::vector<std::string>& argv, const BlasKernel& blas,
                                       const CpuIsa& isa);

// What FixBlasCore did: "OPENBLAS_CORETYPE=Haswell in place of Prescott: ..." in the
// restarted worker, why not where it refused; nothing where it had nothing to do.
std::optional<std::string> BlasCoreFixRecord();

}  // namespace trainerd
