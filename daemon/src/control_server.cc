#include "trainerd/daemon/control_server.h"

#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <vector>

#include "trainerd/daemon/control_queries.h"

namespace trainerd::daemon {

namespace local = asio::local;

Result<std::unique_ptr<ControlServer>> ControlServer::Start(asio::io_context& io,
                                                            const std::string& path,
                                                            std::optional<gid_t> group,
                                                            Handler handler) {
  std::unique_ptr<ControlServer> server(new ControlServer(io, path, group, std::move(handler)));
  boost::system::error_code ec;
  if (std::filesystem::exists(path)) {
    // A socket someone answers on belongs to a running daemon; an unanswered one is stale.
    local::stream_protocol::socket probe(io);
    probe.connect(local::stream_protocol::endpoint(path), ec);
    if (!ec) return Status::FailedPrecondition(path + ": another trainerd is listening here");
    std::error_code removed;
    std::filesystem::remove(path, removed);
  }
  server->acceptor_.open(local::stream_protocol(), ec);
  if (!ec) server->acceptor_.bind(local::stream_protocol::endpoint(path), ec);
  if (!ec) server->acceptor_.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) return Status::IOError(path + ": cannot listen on the control socket: " + ec.message());
  ::chmod(path.c_str(), 0660);
  asio::co_spawn(io, server->Accept(), asio::detached);
  return server;
}

ControlServer::ControlServer(asio::io_context& io, std::string path, std::optional<gid_t> group,
                             Handler handler)
    : io_(io), path_(std::move(path)), group_(group), handler_(std::move(handler)), acceptor_(io) {}

ControlServer::~ControlServer() {
  boost::system::error_code ec;
  acceptor_.close(ec);
  std::error_code removed;
  std::filesystem::remove(path_, removed);
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

}  // namespace

bool ControlServer::Authorized(int fd) const {
  ucred peer{};
  socklen_t length = sizeof peer;
  if (::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &peer, &length) != 0) return false;
  if (peer.uid == 0 || peer.uid == ::getuid()) return true;
  return group_ && (peer.gid == *group_ || PeerHasSupplementaryGroup(fd, *group_));
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
  if (!Authorized(socket.native_handle())) {
    const nlohmann::json refused =
        Error(kUnauthorized,
              "not allowed: the control socket serves root, the daemon's user "
              "and the configured control.group");
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
    } else {
      try {
        response = handler_(*request);
      } catch (const std::exception& e) {
        response = Error(kInternalError, e.what());
      }
    }
    if (!co_await reply(response)) co_return;
  }
}

}  // namespace trainerd::daemon
