// The supervisor's deadline: a fake clock puts "now" just before the window's end, and real
// child processes (sh scripts) show SIGTERM at the deadline less the grace period, then
// SIGKILL at the deadline for a child that ignores SIGTERM.
#include "trainerd/daemon/worker_supervisor.h"

#include <gtest/gtest.h>

#include <csignal>
#include <fstream>
#include <string>
#include <vector>

#include "../support/temp_dir.h"

namespace trainerd::daemon {
namespace {

// A clock that says 05:59:58 UTC of 2026-11-30 when the test starts, and moves with real time.
class FakeClock final : public Clock {
 public:
  explicit FakeClock(double start) : offset_(start - real_.Now()) {}
  double Now() const override { return real_.Now() + offset_; }

 private:
  SystemClock real_;
  double offset_;
};

constexpr double kDeadline = 1796018400;  // 2026-11-30T06:00:00Z

struct Outcome {
  Result<ProcessExit> exit = Status::Internal("not run");
  std::vector<std::string> lines;
  WorkerExit::StoppedBy stopped_by = WorkerExit::StoppedBy::kNobody;
};

Outcome Supervise(const std::string& script, const Clock& clock,
                  const WorkerSupervisor::Limits& limits, const std::string& pid_file = "") {
  asio::io_context io;
  PosixProcessLauncher launcher;
  WorkerSupervisor supervisor(io, clock, launcher, pid_file);
  Outcome outcome;
  const LaunchSpec spec{{"/bin/sh", "-c", script}, ""};
  const std::function<void(const std::string&)> on_line = [&](const std::string& line) {
    outcome.lines.push_back(line);
  };
  asio::co_spawn(
      io,
      [&]() -> asio::awaitable<void> {
        outcome.exit = co_await supervisor.Run(spec, limits, on_line);
        outcome.stopped_by = supervisor.stopped_by();
      },
      asio::detached);
  io.run();
  return outcome;
}

TEST(WorkerSupervisorTest, ReadsEveryLineAndTheExitCode) {
  const FakeClock clock(kDeadline - 3600);
  const Outcome o = Supervise("echo one; echo two; exit 3", clock, {kDeadline, kDeadline});
  ASSERT_TRUE(o.exit.ok()) << o.exit.status().message();
  EXPECT_TRUE(o.exit->exited);
  EXPECT_EQ(o.exit->code, 3);
  EXPECT_EQ(o.lines, (std::vector<std::string>{"one", "two"}));
  EXPECT_EQ(o.stopped_by, WorkerExit::StoppedBy::kNobody);
}

// Asio opens sockets without O_CLOEXEC: a worker that inherited the control socket's
// listening end kept a restarted daemon from starting while the orphaned worker lived.
TEST(WorkerSupervisorTest, TheWorkerInheritsNoDescriptorOfTheDaemon) {
  testing::TempDir dir;
  asio::io_context io;
  asio::local::stream_protocol::acceptor listening(
      io, asio::local::stream_protocol::endpoint(dir.File("control.sock")));
  const int fd = listening.native_handle();
  ASSERT_GE(fd, 3);
  const FakeClock clock(kDeadline - 3600);
  const Outcome o =
      Supervise("[ -e /proc/$$/fd/" + std::to_string(fd) + " ] && echo inherited || echo closed",
                clock, {kDeadline, kDeadline});
  ASSERT_TRUE(o.exit.ok()) << o.exit.status().message();
  EXPECT_EQ(o.lines, (std::vector<std::string>{"closed"}));
}

// Under a memory limit the kernel's OOM killer takes the worker, not the daemon whose survival
// classifies the OOM and falls back (seen: under ASan the daemon, 187 MB resident, was
// killed before a 178 MB worker in a 192 MB cgroup).
TEST(WorkerSupervisorTest, TheWorkerIsTheOomKillersFirstChoice) {
  const FakeClock clock(kDeadline - 3600);
  const Outcome o = Supervise("cat /proc/self/oom_score_adj", clock, {kDeadline, kDeadline});
  ASSERT_TRUE(o.exit.ok()) << o.exit.status().message();
  EXPECT_EQ(o.lines, (std::vector<std::string>{kWorkerOomScoreAdjust}));
}

TEST(WorkerSupervisorTest, SigtermAtTheDeadlineLessTheGrace) {
  // 2 s before the deadline, with a 1.5 s grace: SIGTERM comes 0.5 s into the run. The child
  // exits 75 on SIGTERM like trainer-run after its checkpoint.
  const FakeClock clock(kDeadline - 2);
  const Outcome o = Supervise(
      "trap 'echo checkpoint; exit 75' TERM; echo started; "
      "while :; do sleep 0.05; done",
      clock, {kDeadline - 1.5, kDeadline});
  ASSERT_TRUE(o.exit.ok()) << o.exit.status().message();
  EXPECT_TRUE(o.exit->exited);
  EXPECT_EQ(o.exit->code, 75);
  EXPECT_EQ(o.lines, (std::vector<std::string>{"started", "checkpoint"}));
  EXPECT_EQ(o.stopped_by, WorkerExit::StoppedBy::kDeadline);
  EXPECT_LT(clock.Now(), kDeadline);  // stopped before the window closed
}

TEST(WorkerSupervisorTest, SigkillAtTheDeadlineForAChildThatIgnoresSigterm) {
  const FakeClock clock(kDeadline - 1);
  const Outcome o =
      Supervise("trap '' TERM; while :; do sleep 0.05; done", clock, {kDeadline - 0.5, kDeadline});
  ASSERT_TRUE(o.exit.ok()) << o.exit.status().message();
  EXPECT_FALSE(o.exit->exited);
  EXPECT_EQ(o.exit->signal, SIGKILL);
  EXPECT_EQ(o.exit->Describe(), "killed by SIGKILL");
  EXPECT_EQ(o.stopped_by, WorkerExit::StoppedBy::kDeadline);
  EXPECT_GE(clock.Now(), kDeadline);
}

TEST(WorkerSupervisorTest, AProgramThatCannotRunIsAnErrorNamingIt) {
  asio::io_context io;
  const FakeClock clock(kDeadline - 60);
  Result<std::unique_ptr<ChildProcess>> child =
      ChildProcess::Spawn(io, {{"/nonexistent/trainer-run"}, ""});
  ASSERT_FALSE(child.ok());
  EXPECT_NE(child.status().message().find("/nonexistent/trainer-run"), std::string::npos);
}

TEST(WorkerSupervisorTest, ThePidFileNamesTheRunningChildAndIsRemovedAfter) {
  testing::TempDir dir;
  const std::string pid_file = dir.File("worker.pid");
  const FakeClock clock(kDeadline - 3600);
  const Outcome o = Supervise("sleep 0.3; cat " + pid_file + "; echo $$", clock,
                              {kDeadline, kDeadline}, pid_file);
  ASSERT_TRUE(o.exit.ok());
  ASSERT_EQ(o.lines.size(), 2u);
  EXPECT_EQ(o.lines[0], o.lines[1]);  // the file held the child's own pid
  EXPECT_FALSE(std::ifstream(pid_file).good());
}

}  // namespace
}  // namespace trainerd::daemon
