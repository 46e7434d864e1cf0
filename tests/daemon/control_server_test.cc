// The control socket's peer check with real credentials: a client process that drops to
// uid/gid 65534 (nobody) with chosen supplementary groups. Needs root to change credentials.
#include "trainerd/daemon/control_server.h"

#include <grp.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <cstring>
#include <thread>
#include <vector>

#include "../support/temp_dir.h"

namespace trainerd::daemon {
namespace {

constexpr gid_t kControlGroup = 4242;  // needs no /etc/group entry to be held
constexpr uid_t kNobody = 65534;

// Connects as uid 65534 with primary group `gid` and `supplementary` groups, sends one status
// request and returns the reply line ("" when the connection failed).
std::string RequestAs(const std::string& socket_path, gid_t gid,
                      const std::vector<gid_t>& supplementary) {
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  std::strncpy(address.sun_path, socket_path.c_str(), sizeof address.sun_path - 1);
  static constexpr char kRequest[] = "{\"command\": \"status\"}\n";
  int pipe_fds[2];
  if (::pipe(pipe_fds) != 0) return "";
  const pid_t child = ::fork();
  if (child == 0) {  // only system calls from here: the parent has an io thread
    ::close(pipe_fds[0]);
    // A refusing server answers and closes at once: the request may then meet a closed socket.
    ::signal(SIGPIPE, SIG_IGN);
    if (::setgroups(supplementary.size(), supplementary.data()) != 0 || ::setgid(gid) != 0 ||
        ::setuid(kNobody) != 0) {
      ::_exit(2);
    }
    const int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
    if (::connect(fd, reinterpret_cast<const sockaddr*>(&address), sizeof address) != 0) {
      ::_exit(3);
    }
    [[maybe_unused]] ssize_t sent = ::write(fd, kRequest, sizeof kRequest - 1);
    char buffer[4096];
    ssize_t n;
    while ((n = ::read(fd, buffer, sizeof buffer)) > 0) {
      [[maybe_unused]] ssize_t copied = ::write(pipe_fds[1], buffer, static_cast<size_t>(n));
      if (std::memchr(buffer, '\n', static_cast<size_t>(n)) != nullptr) break;
    }
    ::_exit(0);
  }
  ::close(pipe_fds[1]);
  std::string reply;
  char buffer[4096];
  ssize_t n;
  while ((n = ::read(pipe_fds[0], buffer, sizeof buffer)) > 0) reply.append(buffer, n);
  ::close(pipe_fds[0]);
  int status = 0;
  ::waitpid(child, &status, 0);
  return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? reply : "";
}

class ControlServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::getuid() != 0) GTEST_SKIP() << "needs root to connect as another user";
    Result<std::unique_ptr<ControlServer>> server =
        ControlServer::Start(io_, socket_, kControlGroup, [](const nlohmann::json&) {
          return nlohmann::json{{"ok", true}};
        });
    ASSERT_TRUE(server.ok()) << server.status().message();
    server_ = std::move(server).value();
    // Past the file modes: the peer check alone decides.
    ::chmod(dir_.path().c_str(), 0755);
    ::chmod(socket_.c_str(), 0666);
    io_thread_ = std::thread([this] { io_.run(); });
  }
  void TearDown() override {
    io_.stop();
    if (io_thread_.joinable()) io_thread_.join();
  }

  testing::TempDir dir_;
  const std::string socket_ = dir_.File("control.sock");
  asio::io_context io_;
  std::unique_ptr<ControlServer> server_;
  std::thread io_thread_;
};

TEST_F(ControlServerTest, AMemberOfTheControlGroupBySupplementaryGroupIsServed) {
  const std::string reply = RequestAs(socket_, kNobody, {kControlGroup});
  EXPECT_NE(reply.find("\"ok\":true"), std::string::npos) << reply;
}

TEST_F(ControlServerTest, TheControlGroupAsPrimaryGroupIsServed) {
  const std::string reply = RequestAs(socket_, kControlGroup, {});
  EXPECT_NE(reply.find("\"ok\":true"), std::string::npos) << reply;
}

TEST_F(ControlServerTest, APeerOutsideTheControlGroupIsRefused) {
  const std::string reply = RequestAs(socket_, kNobody, {kNobody});
  EXPECT_NE(reply.find("unauthorized"), std::string::npos) << reply;
}

}  // namespace
}  // namespace trainerd::daemon
