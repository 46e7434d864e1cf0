// trainer-launch: starts the ranks of a data-parallel job on this host and supervises them as
// one. See `trainer-launch --help`. No torch: it only forks, signals and waits.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "trainerd/trainer/spec/units.h"

namespace {

constexpr const char* kUsage = R"(usage:
  trainer-launch --ranks N [--master-port PORT] [--stop-timeout DURATION] -- COMMAND [ARG...]

Starts N copies of COMMAND on this host as the ranks of one data-parallel job (for trainer-run:
a job with distributed.ranks N; docs/distributed.md), each with torchrun's environment:
RANK and LOCAL_RANK (0 .. N-1), WORLD_SIZE and LOCAL_WORLD_SIZE (N), MASTER_ADDR (127.0.0.1)
and MASTER_PORT. The ranks share this process's stdin, stdout and stderr (trainer-run's rank 0
alone prints events on stdout).

options:
  --ranks N              processes to start, 1 .. 1024
  --master-port PORT     where rank 0 hosts the job's store; default: a free port
  --stop-timeout DURATION
                         after a rank fails, the others get SIGTERM, and SIGKILL this much
                         later if they are still running (default 30s)
  --help                 this text

signals: SIGTERM, SIGINT and SIGHUP are passed on to every rank (trainer-run ranks then agree
  on the update to stop at, rank 0 writes the checkpoint, all exit 75). Each rank gets SIGTERM
  if trainer-launch dies.

exit: 0 when every rank exited 0. When a rank fails (exits non-zero or is killed by a signal),
  the first one's outcome: its exit code, or the same signal, which trainer-launch then
  sends itself, so whoever started it sees what the rank saw. 2: usage error. 1: a rank
  could not be started.
)";

struct Options {
  int ranks = 0;
  int master_port = 0;  // 0: pick a free one
  double stop_timeout_seconds = 30;
  std::vector<std::string> command;
};

class UsageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

int ParseInt(const std::string& flag, const std::string& text, int min, int max) {
  char* end = nullptr;
  errno = 0;
  const long n = std::strtol(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || errno != 0 || n < min || n > max) {
    throw UsageError(flag + ": expected an integer in [" + std::to_string(min) + ", " +
                     std::to_string(max) + "], got '" + text + "'");
  }
  return static_cast<int>(n);
}

Options ParseOptions(int argc, char** argv) {
  Options options;
  int i = 1;
  for (; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--") {
      ++i;
      break;
    }
    if (i + 1 >= argc) throw UsageError(arg + ": needs a value, or is not an option");
    const std::string value = argv[++i];
    if (arg == "--ranks") {
      options.ranks = ParseInt(arg, value, 1, 1024);
    } else if (arg == "--master-port") {
      options.master_port = ParseInt(arg, value, 1, 65535);
    } else if (arg == "--stop-timeout") {
      const trainerd::Result<double> seconds = trainerd::ParseDurationSeconds(value);
      if (!seconds.ok() || *seconds <= 0) {
        throw UsageError(arg + ": expected a positive duration such as 30s or 2m, got '" + value +
                         "'");
      }
      options.stop_timeout_seconds = *seconds;
    } else {
      throw UsageError("unknown option '" + arg + "'");
    }
  }
  for (; i < argc; ++i) options.command.emplace_back(argv[i]);
  if (options.ranks == 0) throw UsageError("--ranks N is required");
  if (options.command.empty()) throw UsageError("no command after --");
  return options;
}

// A port nobody listens on now: the kernel's choice for a socket bound to port 0.
int FreeLoopbackPort() {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof address;
  int port = -1;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) == 0) {
    port = ntohs(address.sin_port);
  }
  ::close(fd);
  return port;
}

std::string DescribeStatus(int status) {
  if (WIFEXITED(status)) return "exited with code " + std::to_string(WEXITSTATUS(status));
  const int signal = WTERMSIG(status);
  const char* name = sigabbrev_np(signal);
  return std::string("was killed by ") +
         (name ? std::string("SIG") + name : "signal " + std::to_string(signal));
}

bool Failed(int status) { return !WIFEXITED(status) || WEXITSTATUS(status) != 0; }

class RankGroup {
 public:
  explicit RankGroup(Options options) : options_(std::move(options)) {}

  // Starts the ranks, supervises them to the end and returns the exit status to give.
  int Run() {
    sigset_t handled;
    sigemptyset(&handled);
    for (int signal : {SIGCHLD, SIGTERM, SIGINT, SIGHUP}) sigaddset(&handled, signal);
    sigprocmask(SIG_BLOCK, &handled, &original_mask_);
    const int port = options_.master_port > 0 ? options_.master_port : FreeLoopbackPort();
    if (port < 0) {
      std::fprintf(stderr, "trainer-launch: no free port on 127.0.0.1: %s\n", std::strerror(errno));
      return 1;
    }
    for (int rank = 0; rank < options_.ranks; ++rank) {
      if (!Start(rank, port)) {
        StopAll("a rank could not be started");
        Supervise(handled);
        return 1;
      }
    }
    std::fprintf(stderr, "trainer-launch: %d ranks of %s, master 127.0.0.1:%d\n", options_.ranks,
                 options_.command.front().c_str(), port);
    Supervise(handled);
    return ExitStatus();
  }

 private:
  using Clock = std::chrono::steady_clock;

  bool Start(int rank, int port) {
    const pid_t parent = ::getpid();
    const pid_t pid = ::fork();
    if (pid < 0) {
      std::fprintf(stderr, "trainer-launch: fork: %s\n", std::strerror(errno));
      return false;
    }
    if (pid == 0) Exec(rank, port, parent);
    pids_.push_back(pid);
    return true;
  }

  [[noreturn]] void Exec(int rank, int port, pid_t parent) {
    ::prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (::getppid() != parent) ::_exit(1);  // the launcher died before prctl
    sigprocmask(SIG_SETMASK, &original_mask_, nullptr);
    const std::string world = std::to_string(options_.ranks);
    ::setenv("RANK", std::to_string(rank).c_str(), 1);
    ::setenv("LOCAL_RANK", std::to_string(rank).c_str(), 1);
    ::setenv("WORLD_SIZE", world.c_str(), 1);
    ::setenv("LOCAL_WORLD_SIZE", world.c_str(), 1);
    ::setenv("MASTER_ADDR", "127.0.0.1", 1);
    ::setenv("MASTER_PORT", std::to_string(port).c_str(), 1);
    std::vector<char*> argv;
    for (std::string& arg : options_.command) argv.push_back(arg.data());
    argv.push_back(nullptr);
    ::execvp(argv[0], argv.data());
    std::fprintf(stderr, "trainer-launch: rank %d: cannot run %s: %s\n", rank, argv[0],
                 std::strerror(errno));
    ::_exit(127);
  }

  int Running() const {
    int running = 0;
    for (pid_t pid : pids_) running += pid > 0 ? 1 : 0;
    return running;
  }

  void SignalAll(int signal) {
    for (pid_t pid : pids_) {
      if (pid > 0) ::kill(pid, signal);
    }
  }

  void StopAll(const std::string& why) {
    if (kill_at_) return;
    std::fprintf(stderr, "trainer-launch: %s; stopping the other ranks (SIGKILL in %g s)\n",
                 why.c_str(), options_.stop_timeout_seconds);
    SignalAll(SIGTERM);
    kill_at_ = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                  std::chrono::duration<double>(options_.stop_timeout_seconds));
  }

  void Reap() {
    int status = 0;
    pid_t pid;
    while ((pid = ::waitpid(-1, &status, WNOHANG)) > 0) {
      for (std::size_t rank = 0; rank < pids_.size(); ++rank) {
        if (pids_[rank] != pid) continue;
        pids_[rank] = -1;
        if (!Failed(status) || first_failure_) break;
        first_failure_ = status;
        StopAll("rank " + std::to_string(rank) + " (pid " + std::to_string(pid) + ") " +
                DescribeStatus(status));
      }
    }
  }

  void Supervise(const sigset_t& handled) {
    while (Running() > 0) {
      siginfo_t info{};
      int signal;
      if (kill_at_) {
        const auto left = *kill_at_ - Clock::now();
        if (left <= Clock::duration::zero()) {
          std::fprintf(stderr, "trainer-launch: %d ranks still running: SIGKILL\n", Running());
          SignalAll(SIGKILL);
          kill_at_ = Clock::time_point::max();
          continue;
        }
        const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(left).count();
        const timespec timeout{static_cast<time_t>(ns / 1000000000),
                               static_cast<long>(ns % 1000000000)};
        signal = ::sigtimedwait(&handled, &info, &timeout);
      } else {
        signal = ::sigwaitinfo(&handled, &info);
      }
      if (signal == SIGCHLD) {
        Reap();
      } else if (signal > 0) {
        SignalAll(signal);  // the ranks decide together where to stop
      }
    }
  }

  // The first failure's outcome; a signal is passed on by dying of it.
  int ExitStatus() {
    if (!first_failure_) return 0;
    const int status = *first_failure_;
    if (WIFEXITED(status)) return WEXITSTATUS(status);
    const int signal = WTERMSIG(status);
    const rlimit no_core{0, 0};
    ::setrlimit(RLIMIT_CORE, &no_core);
    std::signal(signal, SIG_DFL);
    sigset_t only;
    sigemptyset(&only);
    sigaddset(&only, signal);
    sigprocmask(SIG_UNBLOCK, &only, nullptr);
    ::kill(::getpid(), signal);
    return 128 + signal;  // a signal that does not kill by default
  }

  Options options_;
  sigset_t original_mask_{};
  std::vector<pid_t> pids_;  // by rank; -1 once reaped
  std::optional<int> first_failure_;
  std::optional<Clock::time_point> kill_at_;
};

}  // namespace

int main(int argc, char** argv) {
  for (int i = 1; i < argc && std::string(argv[i]) != "--"; ++i) {
    if (std::string(argv[i]) == "--help" || std::string(argv[i]) == "-h") {
      std::fputs(kUsage, stdout);
      return 0;
    }
  }
  Options options;
  try {
    options = ParseOptions(argc, argv);
  } catch (const UsageError& e) {
    std::fprintf(stderr, "trainer-launch: %s\n\n%s", e.what(), kUsage);
    return 2;
  }
  return RankGroup(std::move(options)).Run();
}
