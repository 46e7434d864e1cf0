// The control socket: a Unix domain stream socket (mode 0660) on the daemon's event loop.
// Each connection sends newline-delimited JSON requests and gets one JSON line back per
// request. Peers are checked with SO_PEERCRED and SO_PEERGROUPS and given a role: root and the
// daemon's own user operate, except the running worker and what it started (it runs as the
// daemon's user and must not steer it); members of the operate group operate; members of the
// read group read. A request the peer's role does not cover (RequiredRole), a request over
// kMaxRequestBytes, malformed JSON or an unknown command gets a JSON error; an oversized
// request or a peer idle for kIdleSeconds also closes the connection. None of it disturbs the
// daemon.
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

// What a peer may do, in order: each role includes the ones before it.
enum class ControlRole { kNone, kRead, kOperate };

// "none", "read", "operate".
const char* ToString(ControlRole role);

// The role a request needs: read for the commands that change nothing (status, runs, show,
// report, configs, release show), operate for every other command, unknown ones included.
ControlRole RequiredRole(const nlohmann::json& request);

// Who gets a role besides root and the daemon's user, and who does not.
struct ControlAccess {
  std::optional<gid_t> read_group;     // its members read (none: nobody else)
  std::optional<gid_t> operate_group;  // its members operate
  // The running worker's pid, if any: it runs as the daemon's user, and it and every process
  // under it are refused (none given: no worker to refuse). Called on the loop at connection.
  std::function<std::optional<pid_t>()> worker;
};

// Who sent a request, as the kernel says (SO_PEERCRED when it connected).
struct ControlPeer {
  uid_t uid = 0;
  pid_t pid = 0;
  ControlRole role = ControlRole::kNone;
};

class ControlServer {
 public:
  // Called only with requests the peer's role covers.
  using Handler =
      std::function<nlohmann::json(const nlohmann::json& request, const ControlPeer& peer)>;
  static constexpr int kIdleSeconds = 10;

  // Binds `path` (a stale socket file left by a dead daemon is replaced; a live daemon's is
  // an error, and so is anything at `path` that is not a socket), then accepts on `io`.
  static Result<std::unique_ptr<ControlServer>> Start(asio::io_context& io, const std::string& path,
                                                      ControlAccess access, Handler handler);
  // Stops accepting and removes the socket file it bound (never one it found there).
  ~ControlServer();

 private:
  ControlServer(asio::io_context& io, std::string path, ControlAccess access, Handler handler);
  asio::awaitable<void> Accept();
  asio::awaitable<void> Serve(asio::local::stream_protocol::socket socket);
  ControlPeer Identify(int fd) const;

  asio::io_context& io_;
  std::string path_;
  ControlAccess access_;
  Handler handler_;
  asio::local::stream_protocol::acceptor acceptor_;
  bool bound_ = false;  // the socket file is this server's: removed when it is destroyed
};

}  // namespace trainerd::daemon
