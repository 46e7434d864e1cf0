// The control socket's peer check with real credentials: a client process that drops to
// uid/gid 65534 (nobody) with chosen supplementary groups. Needs root to change credentials.
#include "trainerd/daemon/control_server.h"

#include <grp.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <thread>
#include <vector>

#include "../support/temp_dir.h"

namespace trainerd::daemon {
namespace {

constexpr gid_t kControlGroup = 4242;  // needs no /etc/group entry to be held
constexpr gid_t kReadGroup = 4243;
constexpr uid_t kNobody = 65534;

// Connects as uid 65534 with primary group `gid` and `supplementary` groups, sends one status
// request and returns the reply line ("" when the connection failed).
std::string RequestAs(const std::string& socket_path, gid_t gid,
                      const std::vector<gid_t>& supplementary,
                      const std::string& request = "{\"command\": \"status\"}\n") {
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  std::strncpy(address.sun_path, socket_path.c_str(), sizeof address.sun_path - 1);
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
    [[maybe_unused]] ssize_t sent = ::write(fd, request.data(), request.size());
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
    ControlAccess access;
    access.read_group = kReadGroup;
    access.operate_group = kControlGroup;
    Result<std::unique_ptr<ControlServer>> server = ControlServer::Start(
        io_, socket_, access, [](const nlohmann::json&, const ControlPeer& peer) {
          return nlohmann::json{{"ok", true}, {"role", ToString(peer.role)}};
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

TEST_F(ControlServerTest, TheReadGroupReadsAndMayNotOperate) {
  EXPECT_NE(RequestAs(socket_, kNobody, {kReadGroup}).find("\"role\":\"read\""), std::string::npos);
  for (const char* request :
       {"{\"command\": \"outcome\", \"outcomes\": []}\n",
        "{\"command\": \"rollback\", \"model\": true}\n",
        "{\"command\": \"release\", \"action\": \"pin\"}\n", "{\"command\": \"cancel\"}\n"}) {
    const std::string reply = RequestAs(socket_, kNobody, {kReadGroup}, request);
    EXPECT_NE(reply.find("needs the operate role"), std::string::npos) << request << reply;
  }
  const std::string show = RequestAs(socket_, kNobody, {kReadGroup},
                                     "{\"command\": \"release\", \"action\": \"show\"}\n");
  EXPECT_NE(show.find("\"ok\":true"), std::string::npos) << show;
  const std::string operated = RequestAs(socket_, kNobody, {kControlGroup},
                                         "{\"command\": \"rollback\", \"model\": true}\n");
  EXPECT_NE(operated.find("\"role\":\"operate\""), std::string::npos) << operated;
}

// Sends a status request as this process's user and returns the reply ("" when none came).
// Only system calls: the caller may have an io thread.
std::string RequestAsThisUser(const std::string& socket_path) {
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  std::strncpy(address.sun_path, socket_path.c_str(), sizeof address.sun_path - 1);
  // A refusing server answers and closes at once: the request may then meet a closed socket.
  ::signal(SIGPIPE, SIG_IGN);
  const int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
  if (::connect(fd, reinterpret_cast<const sockaddr*>(&address), sizeof address) != 0) return "";
  static constexpr char kStatus[] = "{\"command\": \"status\"}\n";
  [[maybe_unused]] ssize_t sent = ::write(fd, kStatus, sizeof kStatus - 1);
  char buffer[4096];
  const ssize_t n = ::read(fd, buffer, sizeof buffer);
  ::close(fd);
  return n > 0 ? std::string(buffer, static_cast<size_t>(n)) : "";
}

// The worker runs as the daemon's user: it, and whatever it starts, is refused however it
// asks, while the same user outside the worker's tree (an operator's trainerctl) operates.
TEST(ControlServerWorkerTest, TheWorkersTreeIsRefusedTheSameUserElsewhereOperates) {
  testing::TempDir dir;
  const std::string path = dir.File("trainerd.sock");
  asio::io_context io;
  std::atomic<pid_t> worker{0};
  ControlAccess access;
  access.worker = [&]() -> std::optional<pid_t> {
    return worker.load() > 0 ? std::optional<pid_t>(worker.load()) : std::nullopt;
  };
  Result<std::unique_ptr<ControlServer>> server =
      ControlServer::Start(io, path, access, [](const nlohmann::json&, const ControlPeer& peer) {
        return nlohmann::json{{"ok", true}, {"role", ToString(peer.role)}};
      });
  ASSERT_TRUE(server.ok()) << server.status().message();
  std::thread loop([&io] { io.run(); });
  int go[2], replies[2];
  ASSERT_EQ(::pipe(go), 0);
  ASSERT_EQ(::pipe(replies), 0);
  // The "worker" waits until the server knows its pid, then a process it starts asks.
  const pid_t started = ::fork();
  if (started == 0) {
    char ready = 0;
    if (::read(go[0], &ready, 1) != 1) ::_exit(2);
    const pid_t grandchild = ::fork();
    if (grandchild == 0) {
      const std::string reply = RequestAsThisUser(path) + "\n";  // never empty: read() returns
      [[maybe_unused]] ssize_t n = ::write(replies[1], reply.data(), reply.size());
      ::_exit(0);
    }
    ::waitpid(grandchild, nullptr, 0);
    ::_exit(0);
  }
  worker = started;
  ASSERT_EQ(::write(go[1], "g", 1), 1);
  ::waitpid(started, nullptr, 0);
  char buffer[4096];
  const ssize_t n = ::read(replies[0], buffer, sizeof buffer);
  const std::string from_the_worker(buffer, n > 0 ? static_cast<size_t>(n) : 0);
  EXPECT_NE(from_the_worker.find("unauthorized"), std::string::npos) << from_the_worker;
  // Another process of the same user, outside the worker's tree.
  const pid_t operator_process = ::fork();
  if (operator_process == 0) {
    const std::string reply = RequestAsThisUser(path) + "\n";
    [[maybe_unused]] ssize_t written = ::write(replies[1], reply.data(), reply.size());
    ::_exit(0);
  }
  ::waitpid(operator_process, nullptr, 0);
  const ssize_t m = ::read(replies[0], buffer, sizeof buffer);
  const std::string from_elsewhere(buffer, m > 0 ? static_cast<size_t>(m) : 0);
  EXPECT_NE(from_elsewhere.find("\"role\":\"operate\""), std::string::npos) << from_elsewhere;
  io.stop();
  loop.join();
  for (const int fd : {go[0], go[1], replies[0], replies[1]}) ::close(fd);
}

TEST(RequiredRoleTest, OnlyTheCommandsThatChangeNothingAreRead) {
  for (const char* command : {"status", "runs", "show", "report", "configs"}) {
    EXPECT_EQ(RequiredRole({{"command", command}}), ControlRole::kRead) << command;
  }
  EXPECT_EQ(RequiredRole({{"command", "release"}, {"action", "show"}}), ControlRole::kRead);
  for (const char* command : {"run-now", "cancel", "rollback", "outcome", "release", "new-one"}) {
    EXPECT_EQ(RequiredRole({{"command", command}}), ControlRole::kOperate) << command;
  }
  EXPECT_EQ(RequiredRole({{"command", "release"}, {"action", "pin"}}), ControlRole::kOperate);
  EXPECT_EQ(RequiredRole({{"command", "release"}, {"action", 5}}), ControlRole::kOperate);
}

TEST(ControlServerStartTest, AFileThatIsNotASocketIsLeftAloneAndRefused) {
  testing::TempDir dir;
  const std::string path = dir.Write("trainerd.sock", "an operator's notes");
  asio::io_context io;
  Result<std::unique_ptr<ControlServer>> server =
      ControlServer::Start(io, path, {}, [](const nlohmann::json&, const ControlPeer&) {
        return nlohmann::json{{"ok", true}};
      });
  ASSERT_FALSE(server.ok());
  EXPECT_NE(server.status().message().find("not a socket"), std::string::npos)
      << server.status().message();
  EXPECT_EQ(testing::ReadFile(path), "an operator's notes");
}

TEST(ControlServerStartTest, ALiveDaemonsSocketIsLeftToIt) {
  testing::TempDir dir;
  const std::string path = dir.File("trainerd.sock");
  asio::io_context io;
  const auto answer = [](const nlohmann::json&, const ControlPeer&) {
    return nlohmann::json{{"ok", true}};
  };
  Result<std::unique_ptr<ControlServer>> live = ControlServer::Start(io, path, {}, answer);
  ASSERT_TRUE(live.ok()) << live.status().message();
  {
    Result<std::unique_ptr<ControlServer>> second = ControlServer::Start(io, path, {}, answer);
    ASSERT_FALSE(second.ok());
    EXPECT_NE(second.status().message().find("another trainerd is listening"), std::string::npos);
  }
  // The refused one removed nothing: the live daemon still answers there.
  asio::local::stream_protocol::socket client(io);
  boost::system::error_code ec;
  client.connect(asio::local::stream_protocol::endpoint(path), ec);
  EXPECT_FALSE(ec) << ec.message();
}

TEST(ControlServerStartTest, AStaleSocketOfADeadDaemonIsReplaced) {
  testing::TempDir dir;
  const std::string path = dir.File("trainerd.sock");
  {
    asio::io_context io;
    asio::local::stream_protocol::acceptor dead(io, asio::local::stream_protocol::endpoint(path));
  }  // closed without removing its file: as a killed daemon leaves it
  ASSERT_TRUE(std::filesystem::exists(path));
  asio::io_context io;
  Result<std::unique_ptr<ControlServer>> server =
      ControlServer::Start(io, path, {}, [](const nlohmann::json&, const ControlPeer&) {
        return nlohmann::json{{"ok", true}};
      });
  EXPECT_TRUE(server.ok()) << server.status().message();
}

}  // namespace
}  // namespace trainerd::daemon
