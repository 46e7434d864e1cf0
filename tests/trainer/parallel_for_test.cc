// LibTorch's at::parallel_for is an inline template: it runs its body on one thread unless the
// translation unit that calls it is compiled with OpenMP. The trainer's own CPU kernels (the
// blockwise attention, the counter dropout) call it from translation units built with the
// flags of trainerd_torch, as this one is (cmake/TrainerdDependencies.cmake): their work is
// split over the runtime's threads.
#include <ATen/Parallel.h>
#include <gtest/gtest.h>

#include <mutex>
#include <set>

namespace trainerd {
namespace {

TEST(ParallelForTest, SplitsTheWorkOverTheRuntimesThreads) {
  const int before = at::get_num_threads();
  at::set_num_threads(2);
  std::mutex mutex;
  std::set<int> threads;
  at::parallel_for(0, 64, /*grain_size=*/1, [&](std::int64_t, std::int64_t) {
    const std::lock_guard<std::mutex> lock(mutex);
    threads.insert(at::get_thread_num());
  });
  at::set_num_threads(before);
  EXPECT_EQ(threads, (std::set<int>{0, 1}));
}

}  // namespace
}  // namespace trainerd
