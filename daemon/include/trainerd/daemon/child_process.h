// A child process the event loop supervises without blocking: its stdout is read line by
// line through a pipe, its exit is awaited through a pidfd (Linux >= 5.3), and it is sent
// signals. Its stderr goes to a file. The child gets SIGTERM if the daemon dies
// (PR_SET_PDEATHSIG), so a worker never outlives a SIGKILLed daemon unnoticed: it writes a
// checkpoint and exits.
#pragma once

#include <sys/types.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "trainerd/common/status.h"
#include "trainerd/daemon/asio.h"

namespace trainerd::daemon {

struct ProcessExit {
  bool exited = false;  // exited normally; else killed by `signal`
  int code = 0;
  int signal = 0;
  std::string Describe() const;  // "exit code 4" or "killed by SIGKILL"
};

// The oom_score_adj every child starts with (of -1000..1000): under a memory limit the
// kernel's OOM killer takes a worker before the daemon.
inline constexpr const char* kWorkerOomScoreAdjust = "500";

struct LaunchSpec {
  std::vector<std::string> argv;  // argv[0] is the executable's path
  std::string stderr_path;        // appended to; "" keeps the daemon's stderr
};

class ChildProcess {
 public:
  // Forks and execs. An executable that cannot be run is reported here (IOError naming the
  // path and errno), not as a mysterious exit code.
  static Result<std::unique_ptr<ChildProcess>> Spawn(asio::io_context& io, const LaunchSpec& spec);
  // A child still running is killed (SIGKILL) and reaped.
  ~ChildProcess();
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  pid_t pid() const { return pid_; }
  // The next line of stdout, without its newline; empty at end of file.
  asio::awaitable<std::optional<std::string>> ReadLine();
  // Waits for the child to exit and reaps it.
  asio::awaitable<ProcessExit> Wait();
  // Sends `signal` unless the child has been reaped.
  void Signal(int signal);

 private:
  ChildProcess(asio::io_context& io, pid_t pid, int stdout_fd, int pidfd);

  pid_t pid_;
  asio::posix::stream_descriptor stdout_;
  asio::posix::stream_descriptor pidfd_;
  asio::streambuf buffer_;
  std::optional<ProcessExit> exit_;
};

}  // namespace trainerd::daemon
