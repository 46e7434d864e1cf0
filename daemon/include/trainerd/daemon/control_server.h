// The control socket: a Unix domain stream socket (mode 0660) on the daemon's event loop.
// Each connection sends newline-delimited JSON requests and gets one JSON line back per
// request. Peers are checked with SO_PEERCRED and SO_PEERGROUPS: root, the daemon's own user, or
// members (by primary or supplementary group) of the configured group. A request over
// kMaxRequestBytes, malformed JSON or an unknown command gets a JSON error; an oversized request or
// a peer idle for kIdleSeconds also closes the connection. None of it disturbs the daemon.
#pragma once

#include <sys/types.h>

#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "trainerd/common/status.h"
#include "trainerd/daemon/asio.h"

namespace trainerd::daemon {

class ControlServer {
 public:
  using Handler = std::function<nlohmann::json(const nlohmann::json& request)>;
  static constexpr int kIdleSeconds = 10;

  // Binds `path` (a stale socket file left by a dead daemon is replaced; a live daemon's is
  // an error), then accepts on `io`. `group`: an extra group allowed in.
  static Result<std::unique_ptr<ControlServer>> Start(asio::io_context& io, const std::string& path,
                                                      std::optional<gid_t> group, Handler handler);
  // Stops accepting and removes the socket file.
  ~ControlServer();

 private:
  ControlServer(asio::io_context& io, std::string path, std::optional<gid_t> group,
                Handler handler);
  asio::awaitable<void> Accept();
  asio::awaitable<void> Serve(asio::local::stream_protocol::socket socket);
  bool Authorized(int fd) const;

  asio::io_context& io_;
  std::string path_;
  std::optional<gid_t> group_;
  Handler handler_;
  asio::local::stream_protocol::acceptor acceptor_;
};

}  // namespace trainerd::daemon
