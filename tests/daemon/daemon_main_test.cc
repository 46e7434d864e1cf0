// RunMain: the daemon's loop ends with its main coroutine, whatever else is armed on it.
#include <gtest/gtest.h>

#include <chrono>
#include <stdexcept>

#include "trainerd/daemon/daemon.h"

namespace trainerd::daemon {
namespace {

// A watchdog ping as the daemon arms it: re-armed every 10 ms for as long as the loop runs.
void ArmPing(asio::steady_timer& timer, int* pings) {
  timer.expires_after(std::chrono::milliseconds(10));
  timer.async_wait([&timer, pings](const boost::system::error_code& ec) {
    if (ec) return;
    ++*pings;
    ArmPing(timer, pings);
  });
}

asio::awaitable<int> Waits(asio::steady_timer& timer, bool fails) {
  timer.expires_after(std::chrono::milliseconds(50));
  co_await timer.async_wait(asio::use_awaitable);
  if (fails) throw std::runtime_error("config.json: hidden_act: type must be string");
  co_return exit_code::kCycleFailed;
}

TEST(RunMainTest, AnExceptionOutOfMainStopsTheLoopWithTheInternalExitCode) {
  asio::io_context io;
  asio::steady_timer watchdog(io);
  asio::steady_timer main_timer(io);
  int pings = 0;
  ArmPing(watchdog, &pings);
  // Without RunMain's stop the loop would ping for ever; this one ends it after 5 s.
  asio::steady_timer guard(io);
  bool guard_stopped_the_loop = false;
  guard.expires_after(std::chrono::seconds(5));
  guard.async_wait([&](const boost::system::error_code& ec) {
    guard_stopped_the_loop = !ec;
    io.stop();
  });
  EXPECT_EQ(RunMain(io, Waits(main_timer, /*fails=*/true)), exit_code::kInternal);
  EXPECT_FALSE(guard_stopped_the_loop);
  EXPECT_GT(pings, 0);
}

TEST(RunMainTest, MainsOwnExitCodeIsTheProcesses) {
  asio::io_context io;
  asio::steady_timer main_timer(io);
  EXPECT_EQ(RunMain(io, Waits(main_timer, /*fails=*/false)), exit_code::kCycleFailed);
}

}  // namespace
}  // namespace trainerd::daemon
