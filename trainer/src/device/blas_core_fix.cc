#include "trainerd/trainer/device/blas_core_fix.h"

#include <ATen/Parallel.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <nlohmann/json.hpp>
#include <sstream>

#include "trainerd/common/json_input.h"
#include "trainerd/trainer/device/machine.h"

extern char** environ;

namespace trainerd {
namespace {

constexpr const char* kCoreVariable = "OPENBLAS_CORETYPE";
constexpr const char* kRecordVariable = "TRAINERD_BLAS_CORE_FIX";

// A deterministic n x n matrix with entries in [-1, 1] (no generator is touched: the worker's
// seeds come later).
torch::Tensor TestMatrix(int64_t n, double phase) {
  return torch::sin(torch::arange(n * n, torch::kFloat64) * 0.37 + phase).view({n, n});
}

// max |c - a b| / sum_k |a_ik b_kj|, the reference in float64 without the BLAS.
double ProductError(const torch::Tensor& a64, const torch::Tensor& b64, const torch::Tensor& c) {
  const int64_t n = a64.size(0);
  const auto a = a64.accessor<double, 2>();
  const auto b = b64.accessor<double, 2>();
  const torch::Tensor c64 = c.to(torch::kFloat64).contiguous();
  const auto got = c64.accessor<double, 2>();
  double worst = 0;
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      double exact = 0;
      double scale = 0;
      for (int64_t k = 0; k < n; ++k) {
        exact += a[i][k] * b[k][j];
        scale += std::abs(a[i][k] * b[k][j]);
      }
      worst = std::max(worst, std::abs(got[i][j] - exact) / std::max(scale, 1e-300));
    }
  }
  return worst;
}

struct ChildResult {
  std::string out;
  int status = 0;
};

// Runs `argv` with `env`, its stdout read whole; an error when it cannot be started.
std::optional<ChildResult> RunChild(const std::string& path, const std::vector<std::string>& argv,
                                    const std::vector<std::string>& env, std::string* error) {
  int pipe_fds[2];
  if (::pipe(pipe_fds) != 0) {
    *error = std::string("pipe: ") + std::strerror(errno);
    return std::nullopt;
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, pipe_fds[1], STDOUT_FILENO);
  posix_spawn_file_actions_addclose(&actions, pipe_fds[0]);
  const auto pointers = [](const std::vector<std::string>& strings) {
    std::vector<char*> out;
    for (const std::string& s : strings) out.push_back(const_cast<char*>(s.c_str()));
    out.push_back(nullptr);
    return out;
  };
  std::vector<char*> child_argv = pointers(argv);
  std::vector<char*> child_env = pointers(env);
  pid_t pid = 0;
  const int spawned =
      ::posix_spawn(&pid, path.c_str(), &actions, nullptr, child_argv.data(), child_env.data());
  posix_spawn_file_actions_destroy(&actions);
  ::close(pipe_fds[1]);
  if (spawned != 0) {
    ::close(pipe_fds[0]);
    *error = "cannot start " + path + ": " + std::strerror(spawned);
    return std::nullopt;
  }
  ChildResult result;
  char buffer[4096];
  for (ssize_t n; (n = ::read(pipe_fds[0], buffer, sizeof buffer)) != 0;) {
    if (n > 0) result.out.append(buffer, static_cast<std::size_t>(n));
    if (n < 0 && errno != EINTR) break;
  }
  ::close(pipe_fds[0]);
  while (::waitpid(pid, &result.status, 0) < 0 && errno == EINTR) {
  }
  return result;
}

// This process's environment with OPENBLAS_CORETYPE=core in place of any it had.
std::vector<std::string> EnvironmentWithCore(const std::string& core) {
  std::vector<std::string> env;
  const std::string prefix = std::string(kCoreVariable) + "=";
  for (char** entry = environ; *entry != nullptr; ++entry) {
    if (!std::string_view(*entry).starts_with(prefix)) env.emplace_back(*entry);
  }
  env.push_back(prefix + core);
  return env;
}

std::string Figure(double value, int digits = 2) {
  std::ostringstream text;
  text.precision(digits);
  text << value;
  return text.str();
}

// Restarts the process as `self argv...` with OPENBLAS_CORETYPE=core once `self --check-blas`
// under it chose that core and matched; returns why not, otherwise.
std::string RestartWithCore(const std::string& self, const std::vector<std::string>& argv,
                            const BlasKernel& blas, const std::string& core) {
  const std::string tried = "OPENBLAS_CORETYPE=" + core + " was not used (kept " + blas.core +
                            "): its check, `trainer-run --check-blas` with it set, ";
  std::string error;
  const std::optional<ChildResult> child =
      RunChild(self, {argv.at(0), "--check-blas"}, EnvironmentWithCore(core), &error);
  if (!child) return tried + "could not start: " + error;
  if (WIFSIGNALED(child->status)) {
    const int signal = WTERMSIG(child->status);
    return tried + "was killed by signal " + std::to_string(signal) + " (" + ::strsignal(signal) +
           ")";
  }
  const std::optional<BlasProductCheck> check = ParseBlasProductCheckJson(child->out);
  if (!check) {
    return tried + "printed no result (exit " + std::to_string(WEXITSTATUS(child->status)) + ")";
  }
  if (check->blas.core != core)
    return tried + "found OpenBLAS on its " + check->blas.core + " kernels";
  if (!check->ok()) {
    return tried + "multiplied " + Figure(check->max_error) +
           " away from the float64 reference (tolerance " + Figure(BlasProductCheck::kTolerance) +
           ")";
  }
  const BlasProductCheck before = CheckBlasProduct();
  const std::string record = "OPENBLAS_CORETYPE=" + core + " in place of " + blas.core +
                             ": its product matched float64 within " + Figure(check->max_error) +
                             " (tolerance " + Figure(BlasProductCheck::kTolerance) +
                             "); a 1024^3 fp32 product on one thread ran " +
                             Figure(before.gflops, 3) + " GFLOP/s on " + blas.core + ", " +
                             Figure(check->gflops, 3) + " on " + core;
  ::setenv(kCoreVariable, core.c_str(), 1);
  ::setenv(kRecordVariable, record.c_str(), 1);
  std::vector<char*> exec_argv;
  for (const std::string& arg : argv) exec_argv.push_back(const_cast<char*>(arg.c_str()));
  exec_argv.push_back(nullptr);
  ::execv(self.c_str(), exec_argv.data());
  // Still here: OpenBLAS keeps the kernels it loaded, whatever the variable now says.
  return "OPENBLAS_CORETYPE=" + core + " passed its check but the worker could not restart (" +
         self + ": " + std::strerror(errno) + "); kept " + blas.core;
}

}  // namespace

std::optional<std::string> CoreToForce(const BlasKernel& blas, const CpuIsa& isa) {
  if (!BlasBelowTheCpu(blas, isa)) return std::nullopt;
  return CoreServing(isa.level);
}

BlasProductCheck CheckBlasProduct(const MatrixProduct& product) {
  const int threads = at::get_num_threads();
  at::set_num_threads(1);
  torch::NoGradGuard no_grad;
  BlasProductCheck check;
  check.blas = DescribeThisBlas();
  const torch::Tensor a = TestMatrix(256, 0.0);
  const torch::Tensor b = TestMatrix(256, 1.0);
  check.max_error = ProductError(a, b, product(a.to(torch::kFloat32), b.to(torch::kFloat32)));
  check.gflops = MeasureMatmulFlops(Precision::kFp32, torch::kCPU) / 1e9;
  at::set_num_threads(threads);
  return check;
}

BlasProductCheck CheckBlasProduct() {
  return CheckBlasProduct(
      [](const torch::Tensor& a, const torch::Tensor& b) { return torch::mm(a, b); });
}

std::string BlasProductCheckJson(const BlasProductCheck& check) {
  return nlohmann::json{{"blas", check.blas.library},
                        {"blas_core", check.blas.core},
                        {"max_error", check.max_error},
                        {"tolerance", BlasProductCheck::kTolerance},
                        {"ok", check.ok()},
                        {"gflops_one_thread", check.gflops}}
      .dump();
}

std::optional<BlasProductCheck> ParseBlasProductCheckJson(const std::string& text) {
  const nlohmann::json json = ParseBoundedJson(text);
  if (!json.is_object() || !json.contains("blas_core") || !json.contains("max_error") ||
      !json.contains("gflops_one_thread")) {
    return std::nullopt;
  }
  BlasProductCheck check;
  check.blas.library = json.value("blas", "unknown");
  check.blas.core = json.value("blas_core", "unknown");
  check.max_error = json.value("max_error", 1.0);
  check.gflops = json.value("gflops_one_thread", 0.0);
  return check;
}

std::optional<std::string> FixBlasCore(const std::string& self,
                                       const std::vector<std::string>& argv, const BlasKernel& blas,
                                       const CpuIsa& isa) {
  if (BlasCoreFixRecord()) return std::nullopt;  // the restarted worker, or one that tried
  const std::optional<std::string> core = CoreToForce(blas, isa);
  if (!core) return std::nullopt;
  const std::string why_not = RestartWithCore(self, argv, blas, *core);
  ::setenv(kRecordVariable, why_not.c_str(), 1);
  return why_not;
}

std::optional<std::string> BlasCoreFixRecord() {
  const char* record = std::getenv(kRecordVariable);
  if (record == nullptr) return std::nullopt;
  return std::string(record);
}

}  // namespace trainerd
