#include "trainerd/daemon/control_server.h"

#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <vector>

#include "trainerd/daemon/control_queries.h"

namespace trainerd::daemon {

namespace local = asio::local;

const char* ToString(ControlRole role) {
  switch (role) {
    case ControlRole::kNone:
      return "none";
    case ControlRole::kRead:
      return "read";
    case ControlRole::kOperate:
      return "operate";
  }
  return "none";
}

ControlRole RequiredRole(const nlohmann::json& request) {
  static const std::set<std::string> kReadCommands = {"status", "runs", "show", "report",
                                                      "configs"};
  const std::string command = request.value("command", "");
  if (kReadCommands.count(command)) return ControlRole::kRead;
  const nlohmann::json action = request.value("action", nlohmann::json());
  if (command == "release" && action.is_string() && action == "show") return ControlRole::kRead;
  return ControlRole::kOperate;
}

Result<std::unique_ptr<ControlServer>> ControlServer::Start(asio::io_context& io,
                                                            const std::string& path,
                                                            ControlAccess access, Handler handler) {
  boost::system::error_code ec;
  struct stat st {};
  if (::lstat(path.c_str(), &st) == 0) {
    if (!S_ISSOCK(st.st_mode)) {  // a file of someone's, never ours to remove
      return Status::FailedPrecondition(
          path +
          ": something that is not a socket is there; remove it or give control.socket "
          "another path");
    }
    // A socket someone answers on belongs to a running daemon; an unanswered one is stale.
    local::stream_protocol::socket probe(io);
    probe.connect(local::stream_protocol::endpoint(path), ec);
    if (!ec) return Status::FailedPrecondition(path + ": another trainerd is listening here");
    std::error_code removed;
    std::filesystem::remove(path, removed);
  }
  std::unique_ptr<ControlServer> server(new ControlServer(io, path, access, std::move(handler)));
  server->acceptor_.open(local::stream_protocol(), ec);
  if (!ec) server->acceptor_.bind(local::stream_protocol::endpoint(path), ec);
  server->bound_ = !ec;  // from here the file at `path` is this server's to remove
  if (!ec) server->acceptor_.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) return Status::IOError(path + ": cannot listen on the control socket: " + ec.message());
  ::chmod(path.c_str(), 0660);
  asio::co_spawn(io, server->Accept(), asio::detached);
  return server;
}

ControlServer::ControlServer(asio::io_context& io, std::string path, ControlAccess access,
                             Handler handler)
    : io_(io),
      path_(std::move(path)),
      access_(access),
      handler_(std::move(handler)),
      acceptor_(io) {}

ControlServer::~ControlServer() {
  boost::system::error_code ec;
  acceptor_.close(ec);
  std::error_code removed;
  if (bound_) std::filesystem::remove(path_, removed);
}

namespace {

// Whether the peer of `fd` held `group` among its supplementary groups when it connected
// (SO_PEERGROUPS, Linux 4.13). The kernel answers from the socket itself, so this needs no
// /proc/<pid>/status of the peer, which systemd's ProtectProc=invisible hides from the daemon
// for every process of another user.
bool PeerHasSupplementaryGroup(int fd, gid_t group) {
  std::vector<gid_t> groups(16);
  socklen_t length = static_cast<socklen_t>(groups.size() * sizeof(gid_t));
  if (::getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, groups.data(), &length) != 0) {
    if (errno != ERANGE) return false;
    groups.resize(length / sizeof(gid_t));  // the kernel said how many there are
    if (::getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, groups.data(), &length) != 0) return false;
  }
  groups.resize(length / sizeof(gid_t));
  return std::find(groups.begin(), groups.end(), group) != groups.end();
}

// Whether `pid` is `ancestor` or runs under it: /proc/<pid>/stat's parent ids walked up to
// init. A process that cannot be read is taken for one (refused).
bool DescendsFrom(pid_t pid, pid_t ancestor) {
  for (int depth = 0; depth < 64 && pid > 1; ++depth) {
    if (pid == ancestor) return true;
    std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
    std::string text;
    if (!std::getline(stat, text)) return true;
    // "pid (comm) state ppid ...": comm may hold spaces and parentheses; the last ')' ends it.
    const std::size_t end = text.rfind(')');
    if (end == std::string::npos) return true;
    std::istringstream rest(text.substr(end + 1));
    std::string state;
    if (!(rest >> state >> pid)) return true;
  }
  return false;
}

}  // namespace

ControlPeer ControlServer::Identify(int fd) const {
  ucred credentials{};
  socklen_t length = sizeof credentials;
  if (::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &credentials, &length) != 0) return {};
  ControlPeer peer{credentials.uid, credentials.pid, ControlRole::kNone};
  const auto member = [&](const std::optional<gid_t>& group) {
    return group && (credentials.gid == *group || PeerHasSupplementaryGroup(fd, *group));
  };
  if (credentials.uid == 0 || credentials.uid == ::getuid()) {
    // The worker runs as the daemon's user: whatever it, or a rank it started, sends is refused.
    const std::optional<pid_t> worker = access_.worker ? access_.worker() : std::nullopt;
    const bool from_worker = worker && DescendsFrom(credentials.pid, *worker);
    peer.role = from_worker ? ControlRole::kNone : ControlRole::kOperate;
  } else if (member(access_.operate_group)) {
    peer.role = ControlRole::kOperate;
  } else if (member(access_.read_group)) {
    peer.role = ControlRole::kRead;
  }
  return peer;
}

asio::awaitable<void> ControlServer::Accept() {
  while (acceptor_.is_open()) {
    boost::system::error_code ec;
    auto token = asio::redirect_error(asio::use_awaitable, ec);
    local::stream_protocol::socket socket = co_await acceptor_.async_accept(token);
    if (ec) {
      if (ec == asio::error::operation_aborted) co_return;
      continue;  // e.g. too many open files: keep serving the others
    }
    asio::co_spawn(io_, Serve(std::move(socket)), asio::detached);
  }
}

asio::awaitable<void> ControlServer::Serve(local::stream_protocol::socket socket) {
  auto reply = [&](const nlohmann::json& response) -> asio::awaitable<bool> {
    const std::string line = response.dump() + "\n";
    boost::system::error_code ec;
    auto token = asio::redirect_error(asio::use_awaitable, ec);
    co_await asio::async_write(socket, asio::buffer(line), token);
    co_return !ec;
  };
  const ControlPeer peer = Identify(socket.native_handle());
  if (peer.role == ControlRole::kNone) {
    const nlohmann::json refused =
        Error(kUnauthorized,
              "not allowed: the control socket serves root, the daemon's user (not its worker) and "
              "the members of control.group and control.read_group");
    co_await reply(refused);
    co_return;
  }
  asio::steady_timer idle(io_);
  std::string buffer;
  while (true) {
    idle.expires_after(std::chrono::seconds(kIdleSeconds));
    idle.async_wait([&socket](const boost::system::error_code& ec) {
      if (!ec) socket.close();
    });
    boost::system::error_code ec;
    auto token = asio::redirect_error(asio::use_awaitable, ec);
    const std::size_t n = co_await asio::async_read_until(
        socket, asio::dynamic_buffer(buffer, kMaxRequestBytes), '\n', token);
    idle.cancel();
    if (ec == asio::error::not_found) {  // the buffer filled without a newline
      const nlohmann::json oversized =
          Error(kBadRequest, "request longer than " + std::to_string(kMaxRequestBytes) + " bytes");
      co_await reply(oversized);
      co_return;
    }
    if (ec) co_return;  // closed by the peer, or idle too long
    const Result<nlohmann::json> request =
        ParseControlRequest(std::string_view(buffer.data(), n - 1));
    buffer.erase(0, n);
    nlohmann::json response;
    if (!request.ok()) {
      response = Error(kBadRequest, request.status().message());
    } else if (peer.role < RequiredRole(*request)) {
      response = Error(kUnauthorized,
                       "not allowed: the command needs the operate role (root, the daemon's user "
                       "or a member of control.group); this peer reads");
    } else {
      try {
        response = handler_(*request, peer);
      } catch (const std::exception& e) {
        response = Error(kInternalError, e.what());
      }
    }
    if (!co_await reply(response)) co_return;
  }
}

}  // namespace trainerd::daemon
