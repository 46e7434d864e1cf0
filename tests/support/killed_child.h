// A crash at a chosen moment: work run in a forked process that SIGKILL ends after a delay,
// for the crash tests that kill a writer at random points and check what the next start finds.
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <functional>
#include <thread>

namespace trainerd::testing {

struct ChildEnd {
  bool killed = false;  // SIGKILL ended it (else it exited first)
  bool failed = false;  // `work` returned false: an error before the kill, not a crash
};

// Runs `work` in a child process and SIGKILLs it after `delay`. The child opens its own
// files and connections (a store opened by the parent must not be shared across the fork);
// work that loops until killed returns only on an error, with false.
inline ChildEnd RunAndKillAfter(const std::function<bool()>& work,
                                std::chrono::microseconds delay) {
  const pid_t child = ::fork();
  if (child == 0) ::_exit(work() ? 0 : 1);
  std::this_thread::sleep_for(delay);
  ::kill(child, SIGKILL);
  int status = 0;
  ::waitpid(child, &status, 0);
  return {WIFSIGNALED(status), WIFEXITED(status) && WEXITSTATUS(status) != 0};
}

}  // namespace trainerd::testing
