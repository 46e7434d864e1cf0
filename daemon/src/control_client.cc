#include "trainerd/daemon/control_client.h"

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "trainerd/common/json_input.h"

namespace trainerd::daemon {

Result<nlohmann::json> SendControlRequest(const std::string& socket_path,
                                          const nlohmann::json& request, int timeout_seconds) {
  sockaddr_un address{};
  if (socket_path.size() >= sizeof address.sun_path) {
    return Status::InvalidArgument(socket_path + ": socket path too long");
  }
  address.sun_family = AF_UNIX;
  socket_path.copy(address.sun_path, sizeof address.sun_path - 1);
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return Status::IOError(std::string("socket: ") + std::strerror(errno));
  timeval timeout{timeout_seconds, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, sizeof timeout);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0) {
    const int e = errno;
    ::close(fd);
    if (e == ENOENT || e == ECONNREFUSED) {
      return Status::NotFound("trainerd is not running (no daemon on " + socket_path + ")");
    }
    return Status::IOError(socket_path + ": " + std::strerror(e));
  }
  const std::string line = request.dump() + "\n";
  for (std::size_t sent = 0; sent < line.size();) {
    const ssize_t n = ::send(fd, line.data() + sent, line.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) {
      const int e = errno;
      ::close(fd);
      return Status::IOError(socket_path + ": send: " + std::strerror(e));
    }
    sent += static_cast<std::size_t>(n);
  }
  std::string response;
  char buffer[65536];
  while (response.empty() || response.back() != '\n') {
    const ssize_t n = ::recv(fd, buffer, sizeof buffer, 0);
    if (n <= 0) {
      const int e = n < 0 ? errno : 0;
      ::close(fd);
      return Status::IOError(socket_path + ": no response from trainerd" +
                             (e != 0 ? std::string(": ") + std::strerror(e) : ""));
    }
    response.append(buffer, static_cast<std::size_t>(n));
  }
  ::close(fd);
  nlohmann::json parsed = ParseBoundedJson(response);
  if (!parsed.is_object()) return Status::Corruption(socket_path + ": response is not JSON");
  return parsed;
}

}  // namespace trainerd::daemon
