#include "trainerd/daemon/child_process.h"

#include <fcntl.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <cstring>
#include <istream>

namespace trainerd::daemon {

std::string ProcessExit::Describe() const {
  if (exited) return "exit code " + std::to_string(code);
  const char* name = sigabbrev_np(signal);
  return std::string("killed by ") +
         (name != nullptr ? std::string("SIG") + name : "signal " + std::to_string(signal));
}

namespace {

// Runs in the forked child: only async-signal-safe calls until exec.
[[noreturn]] void ExecChild(const LaunchSpec& spec, const std::vector<char*>& argv, int stdout_fd,
                            int error_fd, pid_t parent) {
  ::prctl(PR_SET_PDEATHSIG, SIGTERM);
  if (::getppid() != parent) ::_exit(127);  // the daemon died before prctl took effect
  // The OOM killer's first choice under a memory limit: the worker, not the daemon, whose
  // survival classifies the OOM and falls back. Raising one's own score needs no privilege.
  if (const int oom = ::open("/proc/self/oom_score_adj", O_WRONLY | O_CLOEXEC); oom >= 0) {
    [[maybe_unused]] const ssize_t written =
        ::write(oom, kWorkerOomScoreAdjust, std::strlen(kWorkerOomScoreAdjust));
    ::close(oom);
  }
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  ::dup2(stdout_fd, STDOUT_FILENO);
  if (!spec.stderr_path.empty()) {
    const int err = ::open(spec.stderr_path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0640);
    if (err >= 0) ::dup2(err, STDERR_FILENO);
  }
  // Nothing else of the daemon's crosses exec: Asio opens its sockets without O_CLOEXEC, and a
  // worker holding the control socket's listening end makes a restarted daemon believe
  // another one answers there for as long as the orphaned worker lives. Only the exec-error
  // pipe (close-on-exec) stays until exec.
  ::close_range(3, static_cast<unsigned>(error_fd) - 1, 0);
  ::close_range(static_cast<unsigned>(error_fd) + 1, ~0U, 0);
  ::execv(argv[0], argv.data());
  const int e = errno;
  [[maybe_unused]] ssize_t n = ::write(error_fd, &e, sizeof e);
  ::_exit(127);
}

}  // namespace

Result<std::unique_ptr<ChildProcess>> ChildProcess::Spawn(asio::io_context& io,
                                                          const LaunchSpec& spec) {
  if (spec.argv.empty()) return Status::InvalidArgument("no program to run");
  std::vector<char*> argv;
  for (const std::string& a : spec.argv) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  int out[2];
  int error_pipe[2];
  if (::pipe2(out, O_CLOEXEC) != 0) return Status::IOError(std::string("pipe: ") + strerror(errno));
  if (::pipe2(error_pipe, O_CLOEXEC) != 0) {
    ::close(out[0]);
    ::close(out[1]);
    return Status::IOError(std::string("pipe: ") + strerror(errno));
  }
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) {
    for (int fd : {out[0], out[1], error_pipe[0], error_pipe[1]}) ::close(fd);
    return Status::IOError(std::string("fork: ") + strerror(errno));
  }
  if (pid == 0) ExecChild(spec, argv, out[1], error_pipe[1], parent);
  ::close(out[1]);
  ::close(error_pipe[1]);
  int exec_errno = 0;
  const ssize_t n = ::read(error_pipe[0], &exec_errno, sizeof exec_errno);  // EOF: exec worked
  ::close(error_pipe[0]);
  if (n == sizeof exec_errno) {
    ::close(out[0]);
    ::waitpid(pid, nullptr, 0);
    return Status::IOError("cannot run " + spec.argv[0] + ": " + strerror(exec_errno));
  }
  const int pidfd = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
  if (pidfd < 0) {
    const int e = errno;
    ::kill(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
    ::close(out[0]);
    return Status::IOError(std::string("pidfd_open (Linux >= 5.3 required): ") + strerror(e));
  }
  return std::unique_ptr<ChildProcess>(new ChildProcess(io, pid, out[0], pidfd));
}

ChildProcess::ChildProcess(asio::io_context& io, pid_t pid, int stdout_fd, int pidfd)
    : pid_(pid), stdout_(io, stdout_fd), pidfd_(io, pidfd) {}

ChildProcess::~ChildProcess() {
  if (!exit_) {
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
  }
}

asio::awaitable<std::optional<std::string>> ChildProcess::ReadLine() {
  boost::system::error_code ec;
  auto token = asio::redirect_error(asio::use_awaitable, ec);  // no temporaries in co_await
  const std::size_t n = co_await asio::async_read_until(stdout_, buffer_, '\n', token);
  if (ec && buffer_.size() == 0) co_return std::nullopt;  // end of file (or a broken pipe)
  std::istream in(&buffer_);
  std::string line;
  std::getline(in, line);
  (void)n;
  co_return line;
}

asio::awaitable<ProcessExit> ChildProcess::Wait() {
  if (exit_) co_return *exit_;
  co_await pidfd_.async_wait(asio::posix::stream_descriptor::wait_read, asio::use_awaitable);
  int status = 0;
  ::waitpid(pid_, &status, 0);
  ProcessExit e;
  e.exited = WIFEXITED(status);
  e.code = e.exited ? WEXITSTATUS(status) : 0;
  e.signal = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
  exit_ = e;
  co_return e;
}

void ChildProcess::Signal(int signal) {
  if (!exit_) ::kill(pid_, signal);
}

}  // namespace trainerd::daemon
